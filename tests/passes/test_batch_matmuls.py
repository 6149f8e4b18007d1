"""batch-matmuls: an unrolled RNN's per-step input projections become one MatMul whose rows
each step reads a slice of, with the same values."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from graph_helpers import assert_same_values, ops, run_pass, v1_graph

from tf_stitch.passes.batch_matmuls import batch_matmuls

STEPS, FEATURES, UNITS = 4, 8, 6


def _weights(seed: int) -> tf.Tensor:
    values = np.random.default_rng(seed).standard_normal((FEATURES, UNITS)).astype(np.float32)
    return tf.constant(values)


def _unrolled(batch_major: bool, same_weights: bool = True) -> None:
    shape = [None, STEPS, FEATURES] if batch_major else [STEPS, None, FEATURES]
    x = tf.compat.v1.placeholder(tf.float32, shape, name="x")
    seq = tf.transpose(x, [1, 0, 2]) if batch_major else x  # Keras: time-major steps
    w = _weights(0)
    outs = []
    for t, step in enumerate(tf.unstack(seq, axis=0)):
        weights = w if same_weights or t % 2 == 0 else _weights(t)
        outs.append(tf.tanh(tf.matmul(step, weights)))
    tf.identity(tf.add_n(outs), name="out")


def test_time_major_steps_are_one_matmul() -> None:
    g = v1_graph(lambda: _unrolled(batch_major=False), ["x:0"], ["out:0"])
    assert ops(g)["MatMul"] == STEPS
    out = run_pass(batch_matmuls, g)
    assert ops(out)["MatMul"] == 1 and ops(out)["Slice"] == STEPS
    assert_same_values(g, out, batch=3)


def test_batch_major_input_is_multiplied_without_its_transpose() -> None:
    g = v1_graph(lambda: _unrolled(batch_major=True), ["x:0"], ["out:0"])
    out = run_pass(batch_matmuls, g)
    assert ops(out)["MatMul"] == 1
    batched = next(n for n in out if n.op == "MatMul")
    flat = out.node(batched.inputs[0].node)
    assert flat.op == "Reshape" and flat.inputs[0].node == "x"  # the batch-major sequence
    assert_same_values(g, out, batch=2)


def test_only_products_by_the_same_weights_are_batched() -> None:
    g = v1_graph(lambda: _unrolled(batch_major=False, same_weights=False), ["x:0"], ["out:0"])
    out = run_pass(batch_matmuls, g)
    # steps 0 and 2 share the weights (one MatMul for both); steps 1 and 3 have their own
    assert ops(out)["MatMul"] == 3
    assert_same_values(g, out, batch=3)


def test_a_fetched_product_is_left_alone() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [STEPS, None, FEATURES], name="x")
        w = _weights(0)
        first, *rest = tf.unstack(x, axis=0)
        tf.matmul(first, w, name="fetched")
        tf.identity(tf.add_n([tf.matmul(s, w) for s in rest]), name="out")

    g = v1_graph(build, ["x:0"], ["fetched:0", "out:0"])
    out = run_pass(batch_matmuls, g)
    assert out.node("fetched").op == "MatMul"
    assert ops(out)["MatMul"] == 2  # the fetched one, and the other three as one
    assert_same_values(g, out, batch=3)
