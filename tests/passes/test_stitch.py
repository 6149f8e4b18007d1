"""stitch: plans the groups and hands the plan on; the graph is not changed."""

from __future__ import annotations

import tensorflow as tf
from graph_helpers import fingerprint, graph_of, spec

from tf_stitch.passes.base import PassContext
from tf_stitch.passes.stitch import stitch


def _softmax_then_matmul(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    return tf.tanh(tf.matmul(tf.exp(x) * 2.0, w, transpose_b=True)) + 1.0


def test_records_the_plan_and_leaves_the_graph_as_it_was() -> None:
    g = graph_of(_softmax_then_matmul, spec(None, 8), spec(8, 8))
    ctx = PassContext()
    out = stitch.run(g, ctx)
    assert ctx.plan is not None and len(ctx.plan.groups) == 2
    members = {name for group in ctx.plan.groups for name in group.names}
    assert "MatMul" not in {g.node(n).op for n in members}
    assert any("MatMul with transpose_b" in str(r) for r in ctx.records)
    assert out is not g and fingerprint(out) == fingerprint(g)


def test_a_graph_with_nothing_to_stitch_gets_an_empty_plan() -> None:
    g = graph_of(lambda x, w: tf.matmul(x, w), spec(None, 8), spec(8, 8))
    ctx = PassContext()
    stitch.run(g, ctx)
    assert ctx.plan is not None and ctx.plan.groups == []
