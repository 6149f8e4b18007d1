"""Values near the float32 limits in softmax-like chains, in every reduction schedule and in
both kernel sources (C++, and the CUDA source run through the SIMT emulation).

The case behind issue 26: `softmax((x - mean(x)) * 3)` with one element of -3e38. The scaled
row is ~1.4e37 everywhere but at that element (-inf); TensorFlow's softmax is finite. A kernel
that contracted `v * 3 - max` into an FMA in one loop (but not in the loop that took the max)
got the product's rounding error (~1e30) instead of 0, exp() of it was inf, and the row NaN.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_same_specials

import tf_stitch

pytestmark = pytest.mark.usefixtures("kernel_cache")

W = np.random.default_rng(26).standard_normal((16, 64)).astype(np.float32) * 0.2


def _row(x: tf.Tensor) -> tf.Tensor:
    return tf.nn.softmax((x - tf.reduce_mean(x, -1, keepdims=True)) * 3.0)


def _log_softmax(x: tf.Tensor) -> tf.Tensor:
    return tf.nn.log_softmax((x - tf.reduce_mean(x, -1, keepdims=True)) * 3.0)


def _layer_norm(x: tf.Tensor) -> tf.Tensor:
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.square(x - m), -1, keepdims=True)
    return (x - m) * tf.math.rsqrt(v + 1e-5) * 1.5 + 0.25


def _column(x: tf.Tensor) -> tf.Tensor:  # a softmax over the outer axis
    y = (x - tf.reduce_mean(x, 0, keepdims=True)) * 3.0
    e = tf.exp(y - tf.reduce_max(y, 0, keepdims=True))
    return e / tf.reduce_sum(e, 0, keepdims=True)


def _tile(x: tf.Tensor) -> tf.Tensor:  # a matmul tile feeding the softmax
    return _row(tf.matmul(x[:, :16], tf.constant(W)) * 1e36)


CASES: dict[str, tuple[Callable[[tf.Tensor], tf.Tensor], str]] = {
    "row": (_row, "row"),
    "log_softmax": (_log_softmax, "row"),
    "layer_norm": (_layer_norm, "row"),
    "column": (_column, "column"),
    "tile": (_tile, "row"),
}
SPECIALS = (-3e38, 3e38, -np.finfo(np.float32).max, np.finfo(np.float32).max, 1e-40, -1e-45)


# Every case as reported (widths 4 of unknown size and 64 of known size failed) in C++, and
# through the SIMT emulation at the other two.
SHAPES = [(4, False, "cpu"), (64, True, "cpu"), (64, False, "simt"), (4, True, "simt")]


@pytest.mark.parametrize(("width", "known", "source"), SHAPES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_values_near_the_float_limits(
    case: str, width: int, known: bool, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if case == "tile" and width < 16:
        return  # (the tile reads 16 columns)
    monkeypatch.setenv("TF_STITCH_KERNELS", source)
    fn, schedule = CASES[case]
    rows = 5 if case == "column" else 1
    shape = [rows if known else None, width if known else None]
    original = tf.function(fn, input_signature=[tf.TensorSpec(shape)])
    optimized = tf_stitch.optimize(original)
    assert len(optimized.kernels) == 1 and optimized.kernels[0].schedule.startswith(schedule)
    rng = np.random.default_rng(width)
    for special in SPECIALS:
        x = rng.standard_normal((rows, width)).astype(np.float32)
        x[0, 1] = special
        if case == "column":
            x[1, 1] = 1.0
        want, got = original(x).numpy(), optimized(x).numpy()
        if case in ("row", "log_softmax", "tile"):
            _nan_rows_as_without_onednn(want)
        with np.errstate(all="ignore"):
            assert_same_specials(want, got)


def _nan_rows_as_without_onednn(want: np.ndarray) -> None:
    """A softmax row holding NaN is all NaN in TensorFlow's own kernels, NaN only in place in
    oneDNN's (which TensorFlow uses for some shapes): the README's known difference."""
    want[np.isnan(want).any(axis=-1)] = np.nan


def test_the_reported_row_is_finite() -> None:
    x = np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)
    x[0, 1] = -3e38
    got = tf_stitch.optimize(tf.function(_row, input_signature=[tf.TensorSpec([1, None])]))(x)
    assert not np.isnan(got.numpy()).any()
    np.testing.assert_allclose(got.numpy().sum(), 1.0, rtol=1e-5)


@pytest.mark.parametrize("source", ["cpu", "simt"])
def test_log_of_subnormals_is_exact_under_tensorflows_denormals_are_zero(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # TensorFlow runs kernels with denormals-are-zero: a subnormal compares equal to 0 there,
    # and its own Log gives -150 ln 2 for every subnormal; the kernel's log reads the bits.
    monkeypatch.setenv("TF_STITCH_KERNELS", source)
    fn = tf.function(lambda x: tf.math.log(tf.abs(x)) * 2.0 + 1.0)
    optimized = tf_stitch.optimize(fn, input_signature=[tf.TensorSpec([None])])
    assert len(optimized.kernels) == 1
    x = np.array([1e-40, -1e-39, 1.4e-45, 1e-38, 0.0, -0.0, 2.5], np.float32)
    got = optimized(x).numpy()
    with np.errstate(divide="ignore"):
        want = np.log(np.abs(x.astype(np.float64))) * 2.0 + 1.0
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=1e-6)
