"""fetch-names: a fetched tensor a pass moved is named as the caller asked again."""

from __future__ import annotations

import tensorflow as tf
from graph_helpers import assert_same_values, v1_graph

from tf_stitch.graph.ir import TensorRef
from tf_stitch.passes.base import PassContext
from tf_stitch.passes.fetch_names import keep_fetch_names
from tf_stitch.passes.split_slices import split_slices


def _split() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [2, 6], name="x")
    tf.split(x, [1, 2, 3], 1, name="s")


def test_split_pieces_get_their_names_back_as_identity_n() -> None:
    g = v1_graph(_split, outputs=["s:2", "s:0"])
    ctx = PassContext(requested_outputs=list(g.outputs))
    moved = split_slices.run(g, ctx)
    assert "s" not in moved  # the pass renamed the fetches
    out = keep_fetch_names.run(moved, ctx)
    assert out.outputs == [TensorRef("s", 2), TensorRef("s", 0)]
    assert out.node("s").op == "IdentityN" and len(out.node("s").outputs) == 3
    assert_same_values(g, out)


def test_output_zero_gets_an_identity() -> None:
    g = v1_graph(_split, outputs=["s:0"])
    ctx = PassContext(requested_outputs=list(g.outputs))
    out = keep_fetch_names.run(split_slices.run(g, ctx), ctx)
    assert out.node("s").op == "Identity"
    assert_same_values(g, out)


def test_nothing_to_do_when_names_are_kept() -> None:
    g = v1_graph(_split, outputs=["s:1"])
    assert keep_fetch_names.run(g, PassContext(requested_outputs=list(g.outputs))) is g
