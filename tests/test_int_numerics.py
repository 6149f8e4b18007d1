"""Integers stitched with TensorFlow's exact results (codegen/cpu_int.h): every integer dtype's
wrapping arithmetic, division rounding (by constants, with -1 and the minimum value), shifts
and bitwise ops, comparisons and selects, and casts between integers, bools and floats; each
graph one kernel, compared bit for bit with TensorFlow's CPU kernels on random values over the
whole range of the dtype and its extremes, as the CPU kernels and as the CUDA kernels through
the SIMT emulation.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import tensorflow as tf

import tf_stitch

SIGNED = [tf.int8, tf.int16, tf.int32, tf.int64]
UNSIGNED = [tf.uint8, tf.uint16, tf.uint32, tf.uint64]
SHAPE = (None, 3, 40)


def values(dtype: tf.DType, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Uniform over the dtype's range, with its minimum, maximum, 0, 1 and -1 sprinkled in."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype.as_numpy_dtype)
    x = rng.integers(info.min, info.max, shape, dtype=dtype.as_numpy_dtype, endpoint=True)
    special = [info.min, info.max, 0, 1, info.max // 2, *([-1] * (info.min < 0))]
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, flat.size // 4)] = rng.choice(
        np.asarray(special, x.dtype), flat.size // 4
    )
    return x


def small(dtype: tf.DType, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Values in [-40, 40] (in [0, 80] unsigned): shift amounts, and operands that stay small."""
    rng = np.random.default_rng(seed)
    low = 0 if dtype.is_unsigned else -40
    return rng.integers(low, low + 81, shape).astype(dtype.as_numpy_dtype)


def _arithmetic(x: tf.Tensor, y: tf.Tensor) -> list[tf.Tensor]:
    a = x * y + x - tf.constant(7, x.dtype)
    return [a, tf.maximum(a, y) * tf.minimum(x, tf.constant(3, x.dtype)), tf.square(a)]


def _signed(x: tf.Tensor, y: tf.Tensor) -> list[tf.Tensor]:
    a = -x + tf.abs(y)
    return [a, tf.sign(a) * tf.math.squared_difference(x, y) if x.dtype.size >= 4 else a - y]


def _divisions(x: tf.Tensor, y: tf.Tensor) -> list[tf.Tensor]:
    """By constants: per column (with -1, where signed) and a scalar; x's extremes included."""
    cols = np.arange(1, 41) * (1 if x.dtype.is_unsigned else np.where(np.arange(40) % 2, -1, 1))
    cols[1] = 1 if x.dtype.is_unsigned else -1
    d = tf.constant(cols, x.dtype)
    s = tf.constant(7, x.dtype)
    out = [tf.math.floordiv(x, d), tf.math.floormod(x, d), tf.truncatediv(x, s)]
    out += [tf.math.floordiv(y, s) + tf.math.floormod(x, s)]
    if not x.dtype.is_unsigned and x.dtype.size >= 4:
        out += [tf.truncatemod(x, d)]
    return out


def _bitwise(x: tf.Tensor, y: tf.Tensor, shift: tf.Tensor) -> list[tf.Tensor]:
    a = tf.bitwise.bitwise_and(x, y) | tf.bitwise.invert(y)
    b = tf.bitwise.bitwise_xor(a, tf.bitwise.left_shift(x, shift))
    return [b, tf.bitwise.right_shift(x, shift), tf.bitwise.bitwise_or(b, x)]


def _select(x: tf.Tensor, y: tf.Tensor) -> list[tf.Tensor]:
    mask = tf.logical_and(x > y, tf.not_equal(x, tf.constant(0, x.dtype))) | (x <= y - x)
    return [tf.where(mask, x, y), mask, tf.where(tf.equal(x, y), tf.zeros_like(x), tf.ones_like(y))]


def _casts(x: tf.Tensor, y: tf.Tensor) -> list[tf.Tensor]:
    """To every other integer dtype (wrapping), to bool and back, and to the floats (rounded to
    nearest as TensorFlow's Cast rounds)."""
    ints = [d for d in SIGNED + UNSIGNED if d != x.dtype]
    out = [tf.cast(x, d) for d in ints]
    out += [tf.cast(tf.cast(x, tf.bool), tf.int32) + tf.cast(x > y, tf.int32)]
    floats = [tf.float32, tf.float64, tf.float16, tf.bfloat16]
    return out + [tf.cast(x, f) * tf.cast(2, f) for f in floats]


def _row_reductions(x: tf.Tensor, y: tf.Tensor) -> list[tf.Tensor]:
    """Sums and products wrap at the dtype's width; a mean sums in 64 bits (as TensorFlow's)."""
    out = [tf.reduce_sum(x, -1), tf.reduce_max(x, -1), tf.reduce_min(y - x, -1)]
    out += [tf.reduce_prod(y, -1, keepdims=True) + x, tf.reduce_mean(x, -1)]
    return [*out, tf.reduce_mean(y, [1, 2])]


def _column_reductions(x: tf.Tensor, y: tf.Tensor) -> list[tf.Tensor]:
    return [tf.reduce_sum(x, 0), tf.reduce_mean(x * y, 0), tf.reduce_max(y, 0)]


@dataclass
class Case:
    name: str
    fn: Callable[..., list[tf.Tensor]]
    dtypes: list[tf.DType]
    shift: bool = False  # a third input: small values (shift amounts)


CASES = [
    Case("arithmetic", _arithmetic, SIGNED + UNSIGNED),
    Case("signed", _signed, SIGNED),
    Case("divisions", _divisions, SIGNED + UNSIGNED),
    Case("bitwise", _bitwise, SIGNED + UNSIGNED, shift=True),
    Case("select", _select, SIGNED + UNSIGNED),
    Case("casts", _casts, SIGNED + UNSIGNED),
    Case("row_reductions", _row_reductions, SIGNED + UNSIGNED),
    Case("column_reductions", _column_reductions, SIGNED + UNSIGNED),
]


def _run_case(fn: Callable[..., list[tf.Tensor]], specs: list[tf.TensorSpec], inputs: list) -> None:
    original = tf.function(fn, input_signature=specs)
    optimized = tf_stitch.optimize(original)
    kernels = sum(n.op == "StitchedKernel" for n in optimized.graph_def.node)
    assert kernels == 1, tf_stitch.explain(optimized)
    if os.environ.get("TF_STITCH_KERNELS") == "simt":  # the CUDA source, not the CPU's
        assert all("ts_emu::launch" in k.source for k in optimized.kernels)
    for xs in inputs:
        for want, got in zip(original(*xs), optimized(*xs), strict=True):
            assert want.dtype == got.dtype
            w, g = want.numpy(), got.numpy()
            if w.dtype.kind == "f" or want.dtype == tf.bfloat16:
                w, g = w.astype(np.float64), g.astype(np.float64)
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("kernels", ["cpu", "simt"])
@pytest.mark.parametrize(
    ("case", "dtype"),
    [(c, d) for c in CASES for d in c.dtypes],
    ids=lambda v: v.name if isinstance(v, (Case, tf.DType)) else str(v),
)
def test_integers_exactly_as_tensorflow(
    case: Case, dtype: tf.DType, kernels: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TF_STITCH_KERNELS", kernels)
    specs = [tf.TensorSpec(SHAPE, dtype)] * (3 if case.shift else 2)
    inputs = []
    for batch, seed in ((2, 0), (1, 1), (5, 2)):
        shape = (batch, *SHAPE[1:])
        xs = [values(dtype, shape, seed), values(dtype, shape, seed + 10)]
        inputs.append(xs + [small(dtype, shape, seed)] * case.shift)
    _run_case(case.fn, specs, inputs)


FLOATS = [tf.float32, tf.float64, tf.float16, tf.bfloat16]


@pytest.mark.parametrize("kernels", ["cpu", "simt"])
@pytest.mark.parametrize("source", FLOATS, ids=lambda d: d.name)
def test_floats_cast_to_integers_exactly_as_tensorflow(
    source: tf.DType, kernels: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Truncated toward zero; to int32 and int64 NaN, infinities and values out of range too
    (the minimum value, as TensorFlow's CPU kernels give on every path); to the other integers
    after a clamp to their range (quantization's clip_by_value, then Round). A 16-bit float is
    rounded to its format before it is converted, as TensorFlow's op before the Cast rounded
    it (after a chain of ops, TensorFlow's roundings between them can make the integer differ
    by one, as tests/test_dtype_numerics.py's `rounding` case shows for Floor)."""
    monkeypatch.setenv("TF_STITCH_KERNELS", kernels)
    chained = source in (tf.float32, tf.float64)

    def casts(x: tf.Tensor) -> list[tf.Tensor]:
        out = [tf.cast(x * tf.cast(3, x.dtype), d) for d in (tf.int32, tf.int64)]
        for d in SIGNED[:2] + UNSIGNED:
            info = np.iinfo(d.as_numpy_dtype)
            low, high = tf.cast(float(info.min), x.dtype), tf.cast(float(info.max), x.dtype)
            y = x * 3 if chained else x
            out.append(tf.cast(tf.round(tf.clip_by_value(y, low, high)), d))
            out.append(tf.cast(tf.clip_by_value(x, low + 0.75, high - 0.5), d))
        return out

    rng = np.random.default_rng(0)
    wide = rng.standard_normal(700) * 10.0 ** rng.integers(0, 12, 700)
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 2.0**31, -(2.0**31)]
    special += [2.0**31 - 64, 2.0**63, -(2.0**63), 255.5, -128.5, 65535.4, 1e30, -1e30]
    x = tf.cast(np.concatenate([wide, special]), source)
    _run_case(casts, [tf.TensorSpec([None], source)], [[x], [x[:37]]])


def test_a_narrowing_cast_of_unclamped_floats_stays_tensorflows() -> None:
    """TensorFlow's int8 of 300.5 is 127 in a vectorized loop and 44 in its scalar tail: no
    kernel matches both, so the Cast is TensorFlow's (and says why); after a clamp it is fused."""

    def unclamped(x: tf.Tensor) -> tf.Tensor:
        return tf.cast(x * 2.0, tf.int8)

    def clamped(x: tf.Tensor) -> tf.Tensor:
        return tf.cast(tf.clip_by_value(x * 2.0, -128.0, 127.0), tf.int8)

    spec = [tf.TensorSpec([None, 64], tf.float32)]
    optimized = tf_stitch.optimize(tf.function(unclamped, input_signature=spec))
    cast = next(n for n in optimized.graph_def.node if n.op == "Cast")
    assert cast.attr["DstT"].type == tf.int8.as_datatype_enum
    assert "not clamped to its range" in tf_stitch.explain(optimized)
    optimized = tf_stitch.optimize(tf.function(clamped, input_signature=spec))
    assert not [n for n in optimized.graph_def.node if n.op == "Cast"]
