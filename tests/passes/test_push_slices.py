"""push-slices: slicing an elementwise result becomes the op on sliced operands."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from graph_helpers import assert_same_values, ops, run_pass, v1_graph

from tf_stitch.passes.push_slices import push_slices
from tf_stitch.passes.split_slices import split_slices


def _gates() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 8], name="x")
    h = tf.compat.v1.placeholder(tf.float32, [None, 8], name="h")
    rng = np.random.default_rng(0)
    w = tf.constant(rng.standard_normal([8, 32]).astype(np.float32))
    u = tf.constant(rng.standard_normal([8, 32]).astype(np.float32))
    z = tf.matmul(x, w) + tf.matmul(h, u) + tf.ones([32])
    i, f, c, o = tf.split(z, 4, axis=1)
    tf.identity(tf.sigmoid(o) * tf.tanh(tf.sigmoid(f) + tf.sigmoid(i) * tf.tanh(c)), name="out")


def test_slices_move_up_to_the_matmuls() -> None:
    g = run_pass(split_slices, v1_graph(_gates))
    out = run_pass(push_slices, g)
    slices = [n for n in out if n.op == "Slice"]
    sources = {out.node(n.inputs[0].node).op for n in slices}
    assert sources <= {"MatMul", "Const"}
    assert ops(out)["AddV2"] == 2 * 4 + 1  # the two adds once per gate, and f + i * c
    assert_same_values(g, out, batch=5)


def test_does_not_push_through_an_expensive_op_read_elsewhere() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 8], name="x")
        y = tf.exp(x)
        tf.identity(tf.slice(y, [0, 2], [-1, 3]) + tf.reduce_sum(y, -1, keepdims=True), name="out")

    g = v1_graph(build)
    out = run_pass(push_slices, g)
    assert ops(out) == ops(g)
    assert_same_values(g, out)


def test_a_cheap_op_read_elsewhere_is_recomputed_on_the_slice() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 8], name="x")
        y = x * 2.0
        tf.identity(tf.slice(y, [0, 2], [-1, 3]) + tf.reduce_sum(y, -1, keepdims=True), name="out")

    g = v1_graph(build)
    out = run_pass(push_slices, g)
    assert ops(out)["Mul"] == 2  # the original for the sum, a copy on the slice of x
    sliced = [n for n in out if n.op == "Slice"]
    assert [out.node(n.inputs[0].node).op for n in sliced] == ["Placeholder"]
    assert_same_values(g, out)


def test_a_shared_op_is_recomputed_once_on_a_path_not_up_every_layer() -> None:
    """A BERT pooler's first token of a stack of residual layers: the slice recomputes the last
    layer's residual add, but does not climb into the layers before, which run in full
    anyway (slicing each one's statistics would only add ops)."""

    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 6, 8], name="x")
        for _ in range(3):
            y = x + tf.tanh(x) * 0.5
            m = tf.reduce_mean(y, -1, keepdims=True)
            x = (y - m) * tf.math.rsqrt(tf.reduce_mean(tf.square(y - m), -1, keepdims=True))
        tf.identity(tf.slice(x, [0, 0, 0], [-1, 1, -1]), name="out")

    g = v1_graph(build)
    out = run_pass(push_slices, g)
    slices = [n for n in out if n.op == "Slice"]
    assert 1 < len(slices) <= 6, [n.name for n in slices]
    assert_same_values(g, out, batch=3)


def test_broadcast_operands_are_not_sliced_along_broadcast_axes() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 6, 8], name="x")
        col = tf.compat.v1.placeholder(tf.float32, [None, 6, 1], name="col")
        tf.identity(tf.slice(x * col, [0, 1, 2], [-1, 4, 3]), name="out")

    g = v1_graph(build)
    out = run_pass(push_slices, g)
    assert ops(out)["Mul"] == 1 and ops(out)["Slice"] == 2
    assert_same_values(g, out, batch=2)
