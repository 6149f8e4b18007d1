"""float16 and bfloat16 stitched: kernels read and write the 16-bit formats and compute in
float32, so they match TensorFlow's float32 computation of the same 16-bit inputs rounded once
to the output's format (within one unit in the last place), and TensorFlow's own 16-bit ops
(which round after every op) within that format's accumulated rounding.

What is not stitched in 16 bits yet stays TensorFlow's, and says why: matmul tiles and gathers.
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


@pytest.mark.parametrize("dtype", HALVES, ids=lambda d: d.name)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_16_bit_graph_is_one_kernel_computing_in_float32(case: Case, dtype: tf.DType) -> None:
    original = tf.function(case.fn, input_signature=[tf.TensorSpec(case.shape, dtype)])
    optimized = tf_stitch.optimize(original)
    assert _stitched(optimized)["StitchedKernel"] == 1, tf_stitch.explain(optimized)
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


def _reason(optimized: object, op: str) -> str:
    text = tf_stitch.explain(optimized)
    return "\n".join(line for line in text.splitlines() if op in line)


@pytest.mark.parametrize("dtype", HALVES, ids=lambda d: d.name)
def test_what_is_not_stitched_in_16_bits_stays_tensorflows_and_says_why(dtype: tf.DType) -> None:
    w = tf.cast(tf.random.stateless_normal([16, 8], seed=[1, 2]), dtype)

    def fn(x: tf.Tensor) -> list[tf.Tensor]:
        return [tf.nn.relu(tf.matmul(tf.tanh(x), w))]

    original = tf.function(fn, input_signature=[tf.TensorSpec([None, 16], dtype)])
    optimized = tf_stitch.optimize(original)
    assert "kernels tile matmuls and gather rows of float32 only" in _reason(optimized, "MatMul")
    x = _inputs((None, 16), 5, 3, dtype)
    for want, got in zip(original(x), optimized(x), strict=True):
        np.testing.assert_allclose(
            got.numpy().astype(np.float32),
            want.numpy().astype(np.float32),
            rtol=ROUNDED[dtype],
            atol=ROUNDED[dtype],
        )


@pytest.mark.parametrize("dtype", HALVES, ids=lambda d: d.name)
def test_a_16_bit_matmuls_bias_add_joins_the_kernel_after_it(dtype: tf.DType) -> None:
    """TensorFlow's CPU remapper fuses the bias add of a float32 matmul only: a 16-bit
    matmul's `BiasAdd` is an op of its own, which the kernel of its epilogue takes."""
    w = tf.cast(tf.random.stateless_normal([16, 32], seed=[3, 4]) * 0.25, dtype)
    bias = tf.cast(tf.linspace(-1.0, 1.0, 32), dtype)

    def fn(x: tf.Tensor) -> tf.Tensor:
        h = tf.nn.bias_add(tf.matmul(x, w), bias)
        return tf.nn.gelu(h, approximate=True) * tf.reduce_mean(x, -1, keepdims=True)

    original = tf.function(fn, input_signature=[tf.TensorSpec([None, 16], dtype)])
    optimized = tf_stitch.optimize(original)
    ops = _stitched(optimized)
    assert ops["BiasAdd"] == 0 and ops["MatMul"] == 1, tf_stitch.explain(optimized)
    x = _inputs((None, 16), 5, 4, dtype)
    np.testing.assert_allclose(
        optimized(x).numpy().astype(np.float32),
        original(x).numpy().astype(np.float32),
        rtol=ROUNDED[dtype],
        atol=ROUNDED[dtype],
    )
