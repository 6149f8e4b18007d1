"""dangling_colocations: colocations with removed nodes go, everything else stays."""

from __future__ import annotations

import tensorflow as tf
from graph_helpers import fingerprint, run_pass, v1_graph

from tf_stitch.passes.colocations import drop_dangling_colocations


def build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
    tf.exp(tf.nn.relu(x, name="relu"), name="out")


def test_a_graph_without_colocations_is_unchanged() -> None:
    g = v1_graph(build)
    assert fingerprint(run_pass(drop_dangling_colocations, g)) == fingerprint(g)


def test_colocations_with_removed_nodes_go() -> None:
    from tf_stitch.graph.ir import AttrList

    g = v1_graph(build)
    marked = g.copy()
    marked.node("out").attrs = {
        **marked.node("out").attrs,
        "_class": AttrList("s", (b"loc:@gone", b"loc:@relu")),
    }
    marked.node("relu").attrs = {
        **marked.node("relu").attrs,
        "_class": AttrList("s", (b"loc:@x2",)),
    }
    out = run_pass(drop_dangling_colocations, marked)
    assert out.node("out").attrs["_class"] == AttrList("s", (b"loc:@relu",))
    assert "_class" not in out.node("relu").attrs
