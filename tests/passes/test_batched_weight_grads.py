"""batched-weight-grads: Sum(BatchMatMul(x, dy, adj_x), batch axes) of operands with the same
batch is one MatMul of their rows stacked; operands whose batches may differ (one could be 1,
broadcast) keep the batched product."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close
from graph_helpers import assert_same_values, graph_of, ops, run_pass, spec

import tf_stitch
from tf_stitch.passes.batched_weight_grads import batched_weight_grads

W = tf.constant(np.random.default_rng(5).normal(size=(8, 6)).astype("float32") * 0.3)


def _same_batch(x: tf.Tensor) -> tf.Tensor:
    return tf.reduce_sum(tf.matmul(x, tf.tanh(x) * 2.0, adjoint_a=True), axis=0)


def _own_batches(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    return tf.reduce_sum(tf.matmul(x, y, adjoint_a=True), axis=0)  # y's batch may be 1


def test_a_sum_over_the_batch_of_operands_alike_becomes_one_matmul() -> None:
    g = graph_of(_same_batch, spec(None, 5, 8))
    out = run_pass(batched_weight_grads, g)
    assert ops(out)["BatchMatMulV2"] == 0 and ops(out)["Sum"] == 0 and ops(out)["MatMul"] == 1
    assert out.info(out.outputs[0]).shape == (8, 8)
    assert_same_values(g, out, batch=4)


def test_operands_whose_batches_may_differ_keep_the_batched_product() -> None:
    g = graph_of(_own_batches, spec(None, 5, 8), spec(None, 5, 3))
    out = run_pass(batched_weight_grads, g)
    assert ops(out)["BatchMatMulV2"] == 1 and ops(out)["MatMul"] == 0
    f = tf.function(_own_batches, input_signature=[spec(None, 5, 8), spec(None, 5, 3)])
    optimized = tf_stitch.optimize(f)
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=(1, 5, 8)), rng.normal(size=(3, 5, 3))  # x broadcast over y's
    args = [tf.constant(v, tf.float32) for v in (x, y)]
    assert_close(f(*args), optimized(*args))


@pytest.mark.parametrize("batch", [1, 4])
def test_an_einsum_dense_weight_gradient_is_one_matmul(batch: int) -> None:
    """x @ W over a batch of sequences (Keras' EinsumDense, an attention's projections)."""

    def grad(x: tf.Tensor, w: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        with tf.GradientTape() as tape:
            tape.watch(w)
            loss = tf.reduce_sum(tf.square(tf.nn.gelu(tf.matmul(x, w))))
        return loss, tape.gradient(loss, w)

    f = tf.function(grad, input_signature=[spec(None, 5, 8), spec(8, 6)])
    optimized = tf_stitch.optimize(f)
    left = [n.op for n in optimized.graph_def.node]
    # x @ w is a tile of the kernel computing the GELU and its gradient; dW one MatMul
    assert "BatchMatMulV2" not in left and left.count("MatMul") == 1, left
    x = tf.random.normal([batch, 5, 8], seed=batch)
    for want, got in zip(f(x, W), optimized(x, W), strict=True):
        assert_close(want, got)
