"""float16 and bfloat16 stitched: kernels read and write the 16-bit formats and compute in
float32, so they match TensorFlow's float32 computation of the same 16-bit inputs rounded once
to the output's format (within one unit in the last place), and TensorFlow's own 16-bit ops
(which round after every op) within that format's accumulated rounding.

Small matmuls (tiles), gathers and attention take 16-bit operands too, widened as they are read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import tensorflow as tf

import tf_stitch

HALVES = [tf.float16, tf.bfloat16]
# one unit in the last place, relative (10 and 7 bits of significand), with room for the
# float32 reference's own last bits
ULP = {tf.float16: 2.0**-10, tf.bfloat16: 2.0**-7}
# TensorFlow's 16-bit ops round after every op: a few units in the last place, a chain of them
ROUNDED = {tf.float16: 1e-2, tf.bfloat16: 6e-2}


def _layer_norm(x: tf.Tensor) -> tf.Tensor:
    g = tf.constant(np.linspace(0.5, 1.5, x.shape[-1]), x.dtype)
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.math.squared_difference(x, m), -1, keepdims=True)
    return (x - m) * tf.math.rsqrt(v + tf.cast(1e-3, x.dtype)) * g


def _softmax_mask(x: tf.Tensor) -> tf.Tensor:
    return tf.where(x > tf.cast(0.5, x.dtype), tf.nn.softmax(x), tf.zeros_like(x))


def _mixed_precision_block(x: tf.Tensor) -> tf.Tensor:
    """Keras' mixed precision: a 16-bit activation, a float32 layer norm, back to 16 bits."""
    h = tf.nn.gelu(x, approximate=True)
    return tf.cast(_layer_norm(tf.cast(h, tf.float32)), x.dtype) + x


@dataclass
class Case:
    name: str
    fn: Callable[[tf.Tensor], tf.Tensor]
    shape: tuple[int | None, ...]


CASES = [
    Case("gelu", lambda x: tf.nn.gelu(x, approximate=False), (None, 96)),
    Case("bias_relu6", lambda x: tf.nn.relu6(x + tf.cast(0.25, x.dtype)) * 2, (None, 3, 64)),
    Case("swish", lambda x: x * tf.sigmoid(x), (None, 40)),
    Case("softmax", tf.nn.softmax, (None, 128)),
    Case("softmax_mask", _softmax_mask, (None, 33)),
    Case("layer_norm", _layer_norm, (None, 64)),
    Case("row_sums", lambda x: tf.reduce_sum(tf.exp(x), -1) - tf.reduce_max(x, -1), (None, 19)),
    Case("column_stats", lambda x: x - tf.reduce_mean(x, 0, keepdims=True), (None, 37)),
    Case("mixed_precision", _mixed_precision_block, (None, 48)),
]


def _inputs(shape: tuple[int | None, ...], batch: int, seed: int, dtype: tf.DType) -> tf.Tensor:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal([batch if d is None else d for d in shape]).astype(np.float32)
    return tf.cast(x, dtype)


def _stitched(optimized: object) -> Counter[str]:
    return Counter(n.op for n in optimized.graph_def.node)  # type: ignore[attr-defined]


@pytest.mark.parametrize("kernels", ["cpu", "simt"])
@pytest.mark.parametrize("dtype", HALVES, ids=lambda d: d.name)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_16_bit_graph_is_one_kernel_computing_in_float32(
    case: Case, dtype: tf.DType, kernels: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the CPU, and as the CUDA kernel (the exact source nvcc compiles, through the SIMT
    emulation), which must not be left to the CPU."""
    monkeypatch.setenv("TF_STITCH_KERNELS", kernels)
    original = tf.function(case.fn, input_signature=[tf.TensorSpec(case.shape, dtype)])
    optimized = tf_stitch.optimize(original)
    assert _stitched(optimized)["StitchedKernel"] == 1, tf_stitch.explain(optimized)
    if kernels == "simt":
        assert all("ts_emu::launch" in k.source for k in optimized.kernels)  # type: ignore[attr-defined]
    in_float32 = tf.function(lambda x: case.fn(tf.cast(x, tf.float32)))
    for batch, seed in ((3, 0), (1, 1), (6, 2)):
        x = _inputs(case.shape, batch, seed, dtype)
        got = optimized(x)
        assert got.dtype == dtype
        want = tf.cast(in_float32(x), dtype)  # float32 compute, rounded once
        scale = np.maximum(np.abs(want.numpy().astype(np.float32)), 1.0)
        error = np.abs(got.numpy().astype(np.float32) - want.numpy().astype(np.float32))
        assert np.all(error <= 2 * ULP[dtype] * scale), float(np.max(error / scale))
        tf_16 = original(x).numpy().astype(np.float32)  # TensorFlow's own 16-bit ops
        np.testing.assert_allclose(
            got.numpy().astype(np.float32), tf_16, rtol=ROUNDED[dtype], atol=ROUNDED[dtype]
        )


@pytest.mark.parametrize("dtype", HALVES, ids=lambda d: d.name)
def test_casts_round_to_nearest_even_with_tensorflows_specials(dtype: tf.DType) -> None:
    """Every float16 and bfloat16 bit pattern widened exactly, and float32 values around every
    rounding boundary, the overflow, subnormals, zeros, infinities and NaN narrowed as
    TensorFlow's Cast narrows them (the bits compared; NaNs as NaNs)."""

    def widen(h: tf.Tensor) -> list[tf.Tensor]:
        return [tf.cast(h, tf.float32), -tf.cast(h, tf.float32)]

    def narrow(x: tf.Tensor) -> list[tf.Tensor]:
        return [tf.cast(x, dtype), tf.cast(-x, dtype)]

    bits = np.arange(2**16, dtype=np.uint16)
    halves = tf.bitcast(tf.constant(bits), dtype)
    rng = np.random.default_rng(0)
    boundaries = tf.cast(halves, tf.float32).numpy()
    boundaries = boundaries[np.isfinite(boundaries)]
    nudged = np.concatenate(
        [boundaries, np.nextafter(boundaries, np.inf), np.nextafter(boundaries, -np.inf)]
    )
    halfway = (boundaries[:-1].astype(np.float64) + boundaries[1:]) / 2
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65519.99, 65520.0, 1e10, 2.0**-25]
    floats = np.concatenate(
        [
            nudged,
            halfway.astype(np.float32),
            rng.standard_normal(4096).astype(np.float32) * 1e3,
            np.asarray(special, np.float32),
        ]
    ).astype(np.float32)
    for fn, x, spec_dtype in ((widen, halves, dtype), (narrow, tf.constant(floats), tf.float32)):
        original = tf.function(fn, input_signature=[tf.TensorSpec([None], spec_dtype)])
        optimized = tf_stitch.optimize(original)
        assert _stitched(optimized)["StitchedKernel"] == 1, tf_stitch.explain(optimized)
        for want, got in zip(original(x), optimized(x), strict=True):
            assert got.dtype == want.dtype
            w, g = want.numpy(), got.numpy()
            nan = np.isnan(w.astype(np.float32))
            assert np.array_equal(nan, np.isnan(g.astype(np.float32)))
            width = np.uint16 if want.dtype != tf.float32 else np.uint32
            assert np.array_equal(w[~nan].view(width), g[~nan].view(width))


_RNG = np.random.default_rng(7)
_W = _RNG.standard_normal([64, 96]).astype(np.float32) * 0.1
_W_NARROW = _RNG.standard_normal([64, 8]).astype(np.float32) * 0.1
_TABLE = _RNG.standard_normal([100, 32]).astype(np.float32)


def _dense_gelu(x: tf.Tensor) -> tf.Tensor:
    return tf.nn.gelu(tf.matmul(x, tf.constant(_W, x.dtype)) + tf.cast(0.1, x.dtype))


def _narrow_tanh(x: tf.Tensor) -> tf.Tensor:
    return tf.tanh(tf.matmul(x, tf.constant(_W_NARROW, x.dtype))) * 2


def _product_and_epilogue(x: tf.Tensor) -> list[tf.Tensor]:
    h = tf.matmul(x, tf.constant(_W, x.dtype))
    return [h, tf.sigmoid(h) * tf.cast(2, x.dtype) + tf.nn.relu(h)]


def _embedding_norm(ids: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    e = tf.gather(tf.constant(_TABLE, dtype), ids)
    return e * tf.math.rsqrt(tf.reduce_sum(tf.square(e), -1, keepdims=True) + tf.cast(1e-3, dtype))


def _attention(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor) -> tf.Tensor:
    q, k, v = (tf.transpose(t, [0, 2, 1, 3]) for t in (q, k, v))
    p = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) * tf.cast(0.125, q.dtype))
    return tf.transpose(tf.matmul(p, v), [0, 2, 1, 3])


# name -> (function of the dtype, input shapes (None: the batch), the kernel's schedule)
PRODUCTS: dict[str, tuple[Callable[[tf.DType], Callable[..., object]], list[list[int | None]], str]]
PRODUCTS = {
    "dense_gelu": (lambda d: _dense_gelu, [[None, 64]], "loop"),
    "narrow_tanh": (lambda d: _narrow_tanh, [[None, 64]], "loop"),
    "product_and_epilogue": (lambda d: _product_and_epilogue, [[None, 64]], "loop"),
    "embedding_norm": (lambda d: lambda ids: _embedding_norm(ids, d), [[None]], "row"),
    "attention": (lambda d: _attention, [[None, 24, 4, 16]] * 3, "attention"),
}


@pytest.mark.parametrize("kernels", ["cpu", "simt"])
@pytest.mark.parametrize("dtype", HALVES, ids=lambda d: d.name)
@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_16_bit_matmul_tiles_gathers_and_attention_are_stitched(
    name: str, dtype: tf.DType, kernels: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 16-bit matmul's operands are widened to float32 (the right one once per call), a
    gathered row is read in its format, an attention's Q, K and V are loaded as floats: one
    kernel, within 2 units in the last place of TensorFlow's float32 computation rounded once."""
    monkeypatch.setenv("TF_STITCH_KERNELS", kernels)
    make, shapes, schedule = PRODUCTS[name]
    fn = make(dtype)
    index = name == "embedding_norm"
    specs = [tf.TensorSpec(s, tf.int32 if index else dtype) for s in shapes]
    optimized = tf_stitch.optimize(tf.function(fn, input_signature=specs))
    assert _stitched(optimized)["StitchedKernel"] == 1, tf_stitch.explain(optimized)
    (kernel,) = optimized.kernels  # type: ignore[attr-defined]
    assert kernel.schedule.startswith(schedule)

    def in_float32(*xs: tf.Tensor) -> object:
        if index:
            return _embedding_norm(xs[0], tf.float32)
        return fn(*[tf.cast(x, tf.float32) for x in xs])

    rng = np.random.default_rng(8)
    for batch in (3, 1):
        dims = [[batch if d is None else d for d in s] for s in shapes]
        if index:
            xs = [tf.constant(rng.integers(0, len(_TABLE), dims[0]), tf.int32)]
        else:
            xs = [tf.cast(rng.standard_normal(d).astype(np.float32), dtype) for d in dims]
        got = tf.nest.flatten(optimized(*xs))
        for g, w in zip(got, tf.nest.flatten(in_float32(*xs)), strict=True):
            assert g.dtype == dtype
            want = tf.cast(w, dtype).numpy().astype(np.float32)
            scale = np.maximum(np.abs(want), 1.0)
            error = np.abs(g.numpy().astype(np.float32) - want)
            assert np.all(error <= 2 * ULP[dtype] * scale), float(np.max(error / scale))


@pytest.mark.parametrize("dtype", HALVES, ids=lambda d: d.name)
def test_a_16_bit_matmuls_bias_add_joins_the_kernel_after_it(dtype: tf.DType) -> None:
    """TensorFlow's CPU remapper fuses the bias add of a float32 matmul only: a 16-bit
    matmul's `BiasAdd` is an op of its own, which the kernel of its epilogue takes (the
    matmul is too large to be tiled: a library call)."""
    w = tf.cast(tf.random.stateless_normal([512, 1024], seed=[3, 4]) * 0.05, dtype)
    bias = tf.cast(tf.linspace(-1.0, 1.0, 1024), dtype)

    def fn(x: tf.Tensor) -> tf.Tensor:
        h = tf.nn.bias_add(tf.matmul(x, w), bias)
        return tf.nn.gelu(h, approximate=True) * tf.reduce_mean(x, -1, keepdims=True)

    original = tf.function(fn, input_signature=[tf.TensorSpec([None, 512], dtype)])
    optimized = tf_stitch.optimize(original)
    ops = _stitched(optimized)
    assert ops["BiasAdd"] == 0 and ops["MatMul"] == 1, tf_stitch.explain(optimized)
    x = _inputs((None, 512), 5, 4, dtype)
    np.testing.assert_allclose(
        optimized(x).numpy().astype(np.float32),
        original(x).numpy().astype(np.float32),
        rtol=ROUNDED[dtype],
        atol=ROUNDED[dtype],
    )
