"""graph/guards.py: the one guard the passes ask before they rewrite or remove a node."""

from __future__ import annotations

import pytest
import tensorflow as tf
from graph_helpers import graph_of, ops, spec

from tf_stitch.graph.guards import Guard, removable, rewritable
from tf_stitch.graph.ir import Graph, Node, TensorInfo, TensorRef
from tf_stitch.passes.base import PassContext
from tf_stitch.passes.identities import forward_identities
from tf_stitch.passes.transpose_views import transpose_views

F = TensorInfo("float32", (2, 3))


def _graph() -> Graph:
    """x (fed) -> a -> b -> c (fetched); d reads a after `gate` (control edge); n, a target,
    waits on b; e reads d."""
    g = Graph()
    g.add(Node("x", "Placeholder", outputs=[F]))
    g.add(Node("gate", "NoOp"))
    g.add(Node("a", "Relu", [TensorRef("x")], outputs=[F]))
    g.add(Node("b", "Neg", [TensorRef("a")], outputs=[F]))
    g.add(Node("c", "Exp", [TensorRef("b")], outputs=[F]))
    g.add(Node("d", "Abs", [TensorRef("a")], outputs=[F], control_inputs=["gate"]))
    g.add(Node("e", "Sqrt", [TensorRef("d")], outputs=[F]))
    g.add(Node("n", "NoOp", control_inputs=["b"]))
    g.add(Node("fed_mid", "Relu", [TensorRef("a")], outputs=[F]))
    g.inputs = [TensorRef("x"), TensorRef("fed_mid")]
    g.outputs, g.targets = [TensorRef("c")], ["n"]
    return g


@pytest.mark.parametrize(
    ("name", "can_rewrite", "can_remove"),
    [
        ("a", True, True),  # plain
        ("b", True, False),  # n waits for it
        ("c", True, False),  # fetched
        ("d", False, False),  # runs after gate
        ("e", True, True),
        ("n", False, False),  # a target, waiting for b
        ("fed_mid", False, False),  # its value is the caller's
        ("x", False, False),
    ],
)
def test_what_may_be_rewritten_and_what_may_go(
    name: str, can_rewrite: bool, can_remove: bool
) -> None:
    g = _graph()
    guard = Guard(g)
    node = g.node(name)
    assert guard.rewritable(node) is can_rewrite and rewritable(g, node) is can_rewrite
    assert guard.removable(node) is can_remove and removable(g, node) is can_remove


def test_passes_leave_alone_what_the_guard_refuses() -> None:
    """Two passes through the guard: a transpose that keeps the axes' order is a reshape
    unless it is fed; an identity goes unless it is fetched or waited for."""

    def fn(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        t = tf.transpose(tf.reshape(x, [4, 1, 3]), [1, 0, 2], name="t")
        return tf.identity(t, name="kept") * 2.0, tf.identity(t + 1.0, name="gone") * 3.0

    g = graph_of(fn, spec(4, 3))
    out = transpose_views.run(g, PassContext())
    assert "Transpose" not in ops(out)
    g.inputs = [*g.inputs, TensorRef("t")]  # now fed: its value is the caller's
    assert "Transpose" in ops(transpose_views.run(g, PassContext()))
    g.outputs = [*g.outputs, TensorRef("kept")]
    names = set(forward_identities.run(g, PassContext()).nodes)
    assert "kept" in names and "gone" not in names
