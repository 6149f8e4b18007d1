"""GatherV2 inside kernels: each unit of work reads the table row its index names."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close

import tf_stitch
from tf_stitch.fusion.planner import plan_groups
from tf_stitch.graph.frontends import load

S = tf.TensorSpec
VOCAB, DIM = 50, 16
TABLE = tf.constant(np.random.default_rng(0).normal(size=(VOCAB, DIM)).astype("float32"))


def _skip_gram(center: tf.Tensor, negative: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    c = tf.gather(TABLE, center)
    neg = tf.gather(TABLE, negative)
    return (
        tf.math.log_sigmoid(tf.reduce_sum(c * c, -1)),
        tf.reduce_sum(tf.expand_dims(c, 1) * neg, -1),
    )


def _ids(shape: tuple[int, ...], dtype: Any, seed: int) -> tf.Tensor:
    return tf.constant(np.random.default_rng(seed).integers(0, VOCAB, shape), dtype)


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64])
def test_gathered_rows_feed_the_kernel(dtype: tf.DType) -> None:
    specs = [S([None], dtype), S([None, 4], dtype)]
    f = tf.function(_skip_gram, input_signature=specs)
    opt = tf_stitch.optimize(f)
    ops = [n.op for n in opt.graph_def.node]
    assert "GatherV2" not in ops and ops.count("StitchedKernel") == 2
    for batch, seed in ((1, 0), (5, 1), (13, 2)):
        args = (_ids((batch,), dtype, seed), _ids((batch, 4), dtype, seed + 10))
        assert_close(f(*args), opt(*args))


@pytest.mark.parametrize("bad", [VOCAB, -1])
def test_an_index_out_of_range_fails_as_in_tensorflow(bad: int) -> None:
    specs = [S([None], tf.int32), S([None, 4], tf.int32)]
    f = tf.function(_skip_gram, input_signature=specs)
    opt = tf_stitch.optimize(f)
    center = tf.constant([3, bad, 7], tf.int32)
    negative = _ids((3, 4), tf.int32, 0)
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"{bad}.* not in \\[0, {VOCAB}\\)"):
        f(center, negative)
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"{bad}, is not in \\[0, {VOCAB}\\)"):
        opt(center, negative)
    assert_close(f(center[:1], negative[:1]), opt(center[:1], negative[:1]))  # still usable


def _records(fn: Any, *specs: tf.TensorSpec, gathered: bool = False) -> list[str]:
    plan = plan_groups(load(tf.function(fn).get_concrete_function(*specs)).graph)
    assert gathered == any("GatherV2" in {n.op for n in g.nodes} for g in plan.groups)
    return [str(r) for r in plan.records]


def test_gathers_of_columns_or_batches_stay_tensorflow_ops() -> None:
    records = _records(lambda i: tf.exp(tf.gather(TABLE, i, axis=1)) * 2.0, S([None], tf.int32))
    assert any("GatherV2 not of whole rows" in r for r in records)
    records = _records(
        lambda t, i: tf.exp(tf.gather(t, i, axis=1, batch_dims=1)) * 2.0,
        S([3, 5, 4]),
        S([3, 2], tf.int32),
    )
    assert any("GatherV2 not of whole rows" in r for r in records)


def test_gathers_of_scalars_stay_tensorflow_ops() -> None:
    vector = tf.constant(np.arange(VOCAB, dtype=np.float32))
    records = _records(lambda i: tf.exp(tf.gather(vector, i)) * 2.0, S([None], tf.int32))
    assert any("gathers of scalars are not rows" in r for r in records)


def test_a_table_computed_by_another_kernel_is_read_after_it() -> None:
    def fn(t: tf.Tensor, i: tf.Tensor) -> tf.Tensor:
        return tf.exp(tf.gather(tf.tanh(t) * 2.0, i)) + 1.0

    specs = [S([VOCAB, DIM]), S([None], tf.int32)]
    _records(fn, *specs, gathered=True)  # gathered by the kernel after the table's
    f = tf.function(fn, input_signature=specs)
    opt = tf_stitch.optimize(f)
    assert [n.op for n in opt.graph_def.node].count("StitchedKernel") == 2
    args = (tf.random.normal([VOCAB, DIM], seed=1), _ids((7,), tf.int32, 3))
    assert_close(f(*args), opt(*args))


def test_one_row_picked_by_a_constant_index_broadcasts_over_the_rows() -> None:
    specs = [S([None, DIM])]

    def fn(x: tf.Tensor) -> tf.Tensor:
        return tf.tanh(x * tf.gather(TABLE, 3) + 1.0)

    f = tf.function(fn, input_signature=specs)
    opt = tf_stitch.optimize(f)
    x = tf.random.normal([5, DIM], seed=4)
    assert_close(f(x), opt(x))


def _keras_take(table: tf.Tensor, ids: tf.Tensor) -> tf.Tensor:
    """What Keras 3's `Embedding` runs: negative ids count from the table's end."""
    rows = tf.cast(tf.shape(table)[0], ids.dtype)
    return tf.gather(table, tf.where(ids < 0, ids + rows, ids))


def test_keras_wrapped_ids_are_read_raw_and_wrapped_by_the_kernel() -> None:
    """Keras' where(ids < 0, ids + rows, ids) is done by the kernel: its int32 ops are gone,
    negative ids pick rows from the end, ids out of [-rows, rows) fail as in TensorFlow."""

    def fn(ids: tf.Tensor) -> tf.Tensor:
        e = _keras_take(TABLE, ids)
        return e * tf.math.rsqrt(tf.reduce_sum(e * e, -1, keepdims=True))

    f = tf.function(fn, input_signature=[S([None, 3], tf.int32)])
    opt = tf_stitch.optimize(f)
    ops = [n.op for n in opt.graph_def.node]
    assert ops.count("StitchedKernel") == 1
    assert not {"GatherV2", "SelectV2", "Less", "AddV2"} & set(ops), ops
    ids = tf.constant([[0, -1, 5], [-VOCAB, VOCAB - 1, -7]], tf.int32)
    assert_close(f(ids), opt(ids))
    for bad in (VOCAB, -VOCAB - 1):
        with pytest.raises(tf.errors.InvalidArgumentError):
            f(tf.constant([[bad, 0, 0]], tf.int32))
        with pytest.raises(tf.errors.InvalidArgumentError, match="not in"):
            opt(tf.constant([[bad, 0, 0]], tf.int32))


def test_ids_wrapped_by_another_count_are_not_taken_for_keras() -> None:
    def fn(ids: tf.Tensor) -> tf.Tensor:  # wraps by 10, not the table's 50 rows
        return tf.exp(tf.gather(TABLE, tf.where(ids < 0, ids + 10, ids)))

    f = tf.function(fn, input_signature=[S([None], tf.int32)])
    opt = tf_stitch.optimize(f)
    ids = tf.constant([3, -2, 7], tf.int32)
    assert_close(f(ids), opt(ids))
    (gather,) = [k for k in opt.kernels if "GatherV2 (GatherV2)" in k.members]
    assert "SelectV2 (SelectV2)" not in gather.members  # computed before it
