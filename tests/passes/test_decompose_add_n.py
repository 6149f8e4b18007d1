"""decompose-add-n: AddN becomes a left-to-right chain of AddV2."""

from __future__ import annotations

import tensorflow as tf
from graph_helpers import assert_same_values, ops, ref, run_pass, v1_graph

from tf_stitch.passes.decompose_add_n import decompose_add_n


def test_add_n_becomes_a_chain() -> None:
    def build() -> None:
        xs = [tf.compat.v1.placeholder(tf.float32, [None, 3], name=f"x{i}") for i in range(4)]
        tf.add_n(xs, name="total")

    g = v1_graph(build)
    out = run_pass(decompose_add_n, g)
    assert ops(out)["AddN"] == 0 and ops(out)["AddV2"] == 3
    final = out.node("total")
    assert final.op == "AddV2" and final.inputs[1] == ref("x3")
    inner = out.node(final.inputs[0].node)
    assert inner.name.startswith("total_decomposed/") and inner.inputs[1] == ref("x2")
    first = out.node(inner.inputs[0].node)
    assert first.inputs == [ref("x0"), ref("x1")]
    assert out.info(ref("total")) == g.info(ref("total"))
    assert out.outputs == [ref("total")]
    assert_same_values(g, out)


def test_two_terms_become_one_add_with_the_same_name() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        tf.negative(tf.add_n([x, x], name="twice"), name="out")

    g = v1_graph(build)
    out = run_pass(decompose_add_n, g)
    assert out.node("twice").op == "AddV2" and out.node("twice").inputs == [ref("x"), ref("x")]
    assert [n for n in out.nodes if n.startswith("twice_decomposed")] == []
    assert_same_values(g, out)


def negatives() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
    tf.raw_ops.AddN(inputs=[x], name="single")
    xi = tf.cast(x, tf.int32)
    tf.add_n([xi, xi], name="int")
    with tf.control_dependencies([tf.no_op(name="first")]):
        tf.add_n([x, x], name="ordered")
    tf.add_n([x, x], name="fed")


def test_does_not_decompose_single_terms_ints_control_edges_or_feeds() -> None:
    g = v1_graph(negatives, inputs=["x", "fed"])
    out = run_pass(decompose_add_n, g)
    for name in ("single", "int", "ordered", "fed"):
        assert out.node(name).op == "AddN", name
    assert ops(out)["AddV2"] == 0
