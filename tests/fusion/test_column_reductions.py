"""Reductions over outer axes (column kernels): batch statistics, sums over time, and the
chunks of lanes their kernels run."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close

import tf_stitch
from tf_stitch.codegen import cpu_columns
from tf_stitch.fusion.cost_model import COLUMN_LANES

S = tf.TensorSpec


def batch_norm_training(x: tf.Tensor) -> tf.Tensor:
    mean = tf.reduce_mean(x, [0, 1, 2], keepdims=True)
    var = tf.reduce_mean(tf.square(x - mean), [0, 1, 2], keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + 1e-3) * 1.5 + 0.25


def attention_pooling(scores: tf.Tensor, history: tf.Tensor) -> tf.Tensor:
    """DIEN's weighted sum of a history over time: reduces the middle axis of [B,T,H]."""
    return tf.tanh(tf.reduce_sum(tf.sigmoid(scores) * history, 1))


def column_extremes(x: tf.Tensor) -> tf.Tensor:
    return tf.reduce_max(tf.exp(x), 0) - tf.reduce_min(x, 0) + tf.reduce_prod(x * 0.1 + 1.0, 0)


def _check(
    fn: Callable[..., tf.Tensor], specs: list[S], shapes: list[list[list[int]]], kernels: int
) -> tf_stitch.OptimizedFunction:
    f = tf.function(fn, input_signature=specs)
    opt = tf_stitch.optimize(f)
    assert len(opt.kernels) == kernels
    assert any("column(" in k.schedule for k in opt.kernels)
    for seed, call in enumerate(shapes):
        rng = np.random.default_rng(seed)
        args = [tf.constant(rng.standard_normal(s).astype(np.float32)) for s in call]
        assert_close(f(*args), opt(*args), rtol=2e-5, atol=2e-5)
    return opt


def test_batch_norm_statistics_and_normalization_are_one_kernel() -> None:
    # channels not a multiple of the lanes, and batches of several sizes
    channels = COLUMN_LANES + 7
    opt = _check(
        batch_norm_training,
        [S([None, 3, 5, channels])],
        [[[1, 3, 5, channels]], [[4, 3, 5, channels]]],
        kernels=1,
    )
    (kernel,) = opt.kernels
    assert kernel.schedule.startswith(f"column(split_dim=1, domain=[{channels},?,3,5]")


def test_a_sum_over_time_is_a_column_kernel_whose_chunks_stop_at_each_batch_row() -> None:
    # H = 20 < lanes: a chunk of lanes must not run into the next batch row's H
    _check(
        attention_pooling,
        [S([None, 7, 1]), S([None, 7, 20])],
        [[[1, 7, 1], [1, 7, 20]], [[5, 7, 1], [5, 7, 20]]],
        kernels=1,
    )


def test_max_min_and_prod_over_the_batch_axis() -> None:
    _check(column_extremes, [S([None, 70])], [[[1, 70]], [[33, 70]]], kernels=1)


def test_reduced_axes_apart_in_memory_are_walked_by_their_coordinates() -> None:
    # axes 0 and 2 of [A,B,C]: the loop's elements are not equally spaced (general access)
    def fn(x: tf.Tensor) -> tf.Tensor:
        return x * tf.reduce_sum(tf.exp(x * 0.5), [0, 2], keepdims=True)

    _check(fn, [S([4, 6, 5])], [[[4, 6, 5]]], kernels=1)


def test_expensive_values_reused_across_stages_are_buffered_per_lane() -> None:
    def fn(x: tf.Tensor) -> tf.Tensor:
        e = tf.tanh(tf.exp(x * 0.3) * tf.sigmoid(x))  # costly enough to buffer
        return e / tf.reduce_sum(e, 0, keepdims=True)

    opt = _check(fn, [S([8, 40])], [[[8, 40]]], kernels=1)
    text = tf_stitch.explain(opt.original)
    assert ": buffer (cost" in text
    source = "".join(tf_stitch.generated_code(opt.original).values())
    assert f"[i * {COLUMN_LANES} + l]" in source


def test_column_kernel_source_runs_lanes_innermost() -> None:
    f = tf.function(column_extremes, input_signature=[S([None, 70])])
    (source,) = tf_stitch.generated_code(f).values()
    assert f"for (int64_t r0 = ts_begin * {COLUMN_LANES}; r0 < ts_last;)" in source
    assert "in0[in0_r + l + i * (70)]" in source  # the lanes are neighbours in memory


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: tf.reduce_sum(tf.exp(x), 0) + tf.reduce_sum(x, 1),  # rows and columns
        lambda x: tf.reduce_sum(tf.exp(x), 0) * tf.reduce_sum(tf.exp(x), [0, 1]),
    ],
)
def test_reductions_over_different_axes_stay_apart_and_correct(fn: Callable) -> None:
    f = tf.function(fn, input_signature=[S([6, 6])])
    opt = tf_stitch.optimize(f)
    x = tf.random.normal([6, 6])
    assert_close(f(x), opt(x), rtol=2e-5, atol=2e-5)
    for kernel in opt.kernels:
        assert kernel.schedule.count("(") == 1


def _long_column_error(monkeypatch: pytest.MonkeyPatch, partial_rows: int) -> float:
    monkeypatch.setattr(cpu_columns, "PARTIAL_ROWS", partial_rows)
    f = tf.function(lambda x: tf.reduce_sum(x * 1.0, 0), input_signature=[S([None, 3])])
    opt = tf_stitch.optimize(f)
    x = np.full([300_000, 3], 0.1, np.float32)
    exact = x.astype(np.float64).sum(0)
    return float(np.max(np.abs(opt(tf.constant(x)).numpy() - exact) / exact))


def test_long_columns_are_summed_in_partial_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _long_column_error(monkeypatch, cpu_columns.PARTIAL_ROWS) < 3e-5
    # one running sum over all 300k rows (as TensorFlow 2.21 sums this column: 2.7e-3) is
    # what the partial blocks avoid
    assert _long_column_error(monkeypatch, 1 << 40) > 1e-3
