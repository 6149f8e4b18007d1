"""cleanup: planning marks go, everything else stays."""

from __future__ import annotations

import tensorflow as tf
from graph_helpers import assert_same_values, fingerprint, run_pass, v1_graph

from tf_stitch.passes.cleanup import cleanup
from tf_stitch.passes.stitch import GROUP_ATTR


def build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
    tf.exp(tf.nn.relu(x, name="relu"), name="out")


def test_removes_group_marks_only() -> None:
    g = v1_graph(build)
    marked = g.copy()
    for name in ("relu", "out"):
        marked.node(name).attrs = {**marked.node(name).attrs, GROUP_ATTR: b"g0"}
    out = run_pass(cleanup, marked)
    assert all(GROUP_ATTR not in n.attrs for n in out)
    assert fingerprint(out) == fingerprint(g)
    assert marked.node("relu").attrs[GROUP_ATTR] == b"g0"
    assert_same_values(g, out)


def test_unmarked_graph_is_unchanged() -> None:
    g = v1_graph(build)
    assert fingerprint(run_pass(cleanup, g)) == fingerprint(g)


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
    out = run_pass(cleanup, marked)
    assert out.node("out").attrs["_class"] == AttrList("s", (b"loc:@relu",))
    assert "_class" not in out.node("relu").attrs
