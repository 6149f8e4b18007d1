"""Live variables read only by stitched kernels are read in place (no ReadVariableOp, no copy
of a table in copy-on-read mode), and still every call sees their current values."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from conftest import assert_close

import tf_stitch

RNG = np.random.default_rng(11)


def _embedding(table: tf.Variable, dense: tf.Variable | None = None) -> tf.function:
    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32), tf.TensorSpec([None, 8])])
    def fn(ids: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
        rows = tf.gather(table, ids)
        out = tf.nn.relu(rows * x + 1.0) * 2.0
        return out if dense is None else tf.matmul(out, dense)

    return fn


def _reads(optimized: tf_stitch.OptimizedFunction) -> list[str]:
    graph = optimized.flat_fn.graph
    return [op.type for op in graph.get_operations() if op.type == "ReadVariableOp"]


def test_a_table_only_kernels_read_is_read_in_place_and_stays_live() -> None:
    table = tf.Variable(RNG.standard_normal([50, 8]).astype(np.float32))
    fn = _embedding(table)
    ids, x = tf.constant([3, 0, 49, 3]), tf.random.normal([4, 8], seed=1)
    fn(ids, x)  # TensorFlow's ResourceGather puts the table in copy-on-read mode
    optimized = tf_stitch.optimize(fn)
    assert optimized.kernels and len(optimized.read_in_place) == 1
    assert _reads(optimized) == []  # the kernel reads the variable itself
    assert_close(fn(ids, x), optimized(ids, x), rtol=1e-6, atol=1e-6)
    table.scatter_nd_update([[3]], [np.full([8], 5.0, np.float32)])  # a sparse write
    assert_close(fn(ids, x), optimized(ids, x), rtol=1e-6, atol=1e-6)
    table.assign(table * -1.0)  # and a dense one
    assert_close(fn(ids, x), optimized(ids, x), rtol=1e-6, atol=1e-6)


def test_a_variable_tensorflow_ops_read_too_keeps_its_read() -> None:
    table = tf.Variable(RNG.standard_normal([20, 8]).astype(np.float32))
    dense = tf.Variable(RNG.standard_normal([8, 600]).astype(np.float32))  # a library matmul
    fn = _embedding(table, dense)
    optimized = tf_stitch.optimize(fn)
    ids, x = tf.constant([1, 19]), tf.random.normal([2, 8], seed=2)
    assert len(optimized.read_in_place) == 1  # the table; the matmul's weights are read
    assert len(_reads(optimized)) == 1
    assert_close(fn(ids, x), optimized(ids, x), rtol=1e-5, atol=1e-5)
    dense.assign(dense * 0.5)
    assert_close(fn(ids, x), optimized(ids, x), rtol=1e-5, atol=1e-5)
