"""stitch: plans the groups, marks their members and hands the plan on."""

from __future__ import annotations

import tensorflow as tf
from graph_helpers import graph_of, run_pass, spec

from tf_stitch.passes.base import PassContext
from tf_stitch.passes.stitch import GROUP_ATTR, stitch


def _softmax_then_matmul(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    return tf.tanh(tf.matmul(tf.exp(x) * 2.0, w, transpose_b=True)) + 1.0


def test_marks_members_and_records_the_plan() -> None:
    g = graph_of(_softmax_then_matmul, spec(None, 8), spec(8, 8))
    ctx = PassContext()
    out = stitch.run(g, ctx)
    marked = {n.name: n.attrs[GROUP_ATTR] for n in out if GROUP_ATTR in n.attrs}
    assert len(ctx.plan.groups) == 2
    assert set(marked.values()) == {b"g0", b"g1"}
    assert all(GROUP_ATTR not in n.attrs for n in g)  # the input graph is untouched
    assert "MatMul" not in {out.node(n).op for n in marked}
    assert any("MatMul with transpose_b" in str(r) for r in ctx.records)


def test_leaves_a_graph_with_nothing_to_stitch_unmarked() -> None:
    g = graph_of(lambda x, w: tf.matmul(x, w), spec(None, 8), spec(8, 8))
    out = run_pass(stitch, g)
    assert not any(GROUP_ATTR in n.attrs for n in out)
