"""Liveness keys: loop frames and Switch branches of lowered control flow."""

from __future__ import annotations

import tensorflow as tf
from graph_helpers import v1_graph

from tf_stitch.graph.liveness import ROOT, Condition, liveness


def _cond_graph() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
    p = tf.compat.v1.placeholder_with_default(False, [], name="p")
    f, t = tf.raw_ops.Switch(data=x, pred=p, name="sw")
    a = tf.multiply(t, 2.0, name="a")
    b = tf.multiply(f, 3.0, name="b")
    y, _ = tf.raw_ops.Merge(inputs=[a, b], name="m")
    tf.identity(y * x, name="out")


def test_graphs_without_control_flow_are_all_root() -> None:
    g = v1_graph(lambda: tf.identity(tf.exp(tf.compat.v1.placeholder(tf.float32, [2])), "y"))
    assert set(liveness(g).values()) == {ROOT}


def test_switch_branches_differ_and_merge_joins_them() -> None:
    keys = liveness(v1_graph(_cond_graph, outputs=["out"]))
    assert keys["a"].conditions == {Condition((), "p:0", 1)}
    assert keys["b"].conditions == {Condition((), "p:0", 0)}
    assert keys["a"] != keys["b"]
    assert keys["m"] == keys["x"] == keys["out"] == ROOT
    assert "p:0 -> 1" in str(keys["a"])


def test_switches_on_one_predicate_are_one_branch() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        y = tf.compat.v1.placeholder(tf.float32, [2], name="y")
        p = tf.compat.v1.placeholder_with_default(False, [], name="p")
        _, xt = tf.raw_ops.Switch(data=x, pred=p, name="sx")
        _, yt = tf.raw_ops.Switch(data=y, pred=p, name="sy")
        tf.identity(tf.exp(xt, name="ex") + tf.tanh(yt, name="ty"), name="out")

    keys = liveness(v1_graph(build, outputs=["out"]))
    assert keys["ex"] == keys["ty"] == keys["out"]


def _loop_graph() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
    _, h = tf.compat.v1.while_loop(
        lambda i, h: i < 2, lambda i, h: (i + 1, tf.tanh(h) * 2.0), [0, x], name="loop"
    )
    tf.identity(h + 1.0, name="out")


def test_loop_bodies_are_in_their_frame_and_exits_leave_it() -> None:
    tf.compat.v1.disable_control_flow_v2()
    try:
        g = v1_graph(_loop_graph, outputs=["out"])
    finally:
        tf.compat.v1.enable_control_flow_v2()
    keys = liveness(g)
    tanh = next(n.name for n in g if n.op == "Tanh")
    exits = [n.name for n in g if n.op == "Exit"]
    assert keys[tanh].frame == ("loop/while_context",)
    (condition,) = keys[tanh].conditions
    assert condition.frame == ("loop/while_context",) and condition.branch == 1
    assert g.node(condition.predicate.split(":")[0]).op == "LoopCond"
    assert all(keys[e] == ROOT for e in exits)
    assert keys["out"] == ROOT
