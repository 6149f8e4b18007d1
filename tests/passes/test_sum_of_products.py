"""sum-of-products: the sum over steps of a_t^T b_t (a recurrence's weight gradient) is one
matmul of the stacked rows; an Unpack's pieces in order are a Reshape of its input."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close
from graph_helpers import ops, run_pass

import tf_stitch
from tf_stitch.graph.frontends import load
from tf_stitch.passes.sum_of_products import sum_of_products

S = tf.TensorSpec
RNG = np.random.default_rng(8)
W = tf.constant(RNG.standard_normal([8, 16]).astype(np.float32))
U = tf.constant(RNG.standard_normal([16, 16]).astype(np.float32))


def _unrolled_weight_grads(x: tf.Tensor) -> list[tf.Tensor]:
    """Gradients of an unrolled tanh RNN's weights (x: time-major [5, batch, 8])."""
    w, u = tf.identity(W), tf.identity(U)
    with tf.GradientTape() as tape:
        tape.watch([w, u])
        h = tf.zeros([tf.shape(x)[1], 16])
        for x_t in tf.unstack(x):
            h = tf.tanh(tf.matmul(x_t, w) + tf.matmul(h, u))
        loss = tf.reduce_sum(h * h)
    return tape.gradient(loss, [w, u])


def _two_terms_and_more(a: tf.Tensor) -> tf.Tensor:
    """A sum of two row-reducing products and one other term (a: [batch, 8])."""
    b = tf.tanh(a)
    return tf.add_n(
        [tf.matmul(a, b, transpose_a=True), tf.matmul(b, a, transpose_a=True), tf.ones([8, 8])]
    )


def _a_product_read_twice(a: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    p = tf.matmul(a, a, transpose_a=True)
    return tf.add_n([p, tf.matmul(tf.tanh(a), a, transpose_a=True)]), p


CASES = [
    ("unrolled_rnn", _unrolled_weight_grads, S([5, None, 8]), 2),  # dW (Unpack) and dU
    ("two_terms_and_more", _two_terms_and_more, S([None, 8]), 1),
    ("a_product_read_twice", _a_product_read_twice, S([None, 8]), 0),
]


@pytest.mark.parametrize(("name", "fn", "spec", "products"), CASES, ids=[c[0] for c in CASES])
def test_row_reducing_products_summed_become_one_matmul(
    name: str, fn: Callable[..., object], spec: S, products: int
) -> None:
    graph = load(tf.function(fn).get_concrete_function(spec)).graph
    before, after = ops(graph), ops(run_pass(sum_of_products, graph))
    matmuls = [n for n in run_pass(sum_of_products, graph) if n.op == "MatMul"]
    stacked = [n for n in matmuls if "sum_of_products" in n.name]
    assert len(stacked) == products, (name, after)
    if name == "unrolled_rnn":  # 5 products for each weight -> one each; x's rows a Reshape
        assert before["MatMul"] - after["MatMul"] == 2 * 5 - 2
        # the steps' h and pre-activation gradients for dU, those gradients (through the add's
        # own gradient: other tensors) for dW, whose x is a view of the sequence
        assert after["ConcatV2"] == before["ConcatV2"] + 3
        assert after["Reshape"] == before["Reshape"] + 1


@pytest.mark.parametrize("case", [0, 1], ids=["unrolled_rnn", "two_terms_and_more"])
@pytest.mark.usefixtures("kernel_cache")
def test_the_optimized_sum_matches_tensorflow(case: int) -> None:
    _, fn, spec, _ = CASES[case]
    f = tf.function(fn, input_signature=[spec])
    x = tf.random.normal([5 if case == 0 else 3, 4, 8] if case == 0 else [6, 8], seed=case)
    assert_close(f(x), tf_stitch.optimize(f)(x), rtol=1e-4, atol=1e-4)
