"""static-reshape: run-time reshape targets become constants when at most one size is unknown."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from graph_helpers import assert_same_values, ref, run_ir, run_pass, v1_graph

from tf_stitch.graph.ir import DType, Graph, TensorInfo
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.static_reshape import static_reshape


def target(graph: Graph, name: str) -> list[int] | None:
    value = constant_value(graph, graph.node(name).inputs[1])
    return None if value is None else value.tolist()


def build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 3, 4], name="x")
    s = tf.shape(x)
    # tf.tensordot's shape arithmetic: [prod(free dims), prod(contracted dims)]
    t = tf.stack([tf.reduce_prod(tf.gather(s, [0, 1])), tf.reduce_prod(tf.gather(s, [2]))])
    flat = tf.reshape(x, t, name="flat")
    # known only once `flat` has a static shape: needs a second round
    again = tf.reshape(flat, tf.concat([tf.gather(tf.shape(flat), [1]), [-1]], 0), name="again")
    tf.nn.relu(again, name="out")


def test_gives_dynamic_targets_a_constant_shape() -> None:
    g = v1_graph(build)
    assert g.info(ref("flat")) == TensorInfo("float32", (None, None))
    out = run_pass(static_reshape, g)
    assert target(out, "flat") == [-1, 4]
    assert target(out, "again") == [4, -1]
    assert out.node("flat").attrs["Tshape"] == DType("int32")
    assert out.info(ref("flat")) == TensorInfo("float32", (None, 4))
    assert out.info(ref("out")) == TensorInfo("float32", (4, None))
    assert out.outputs == g.outputs == [ref("out")]
    assert_same_values(g, out, batch=3)
    assert_same_values(g, out, batch=5)


def test_leaves_constant_targets_alone() -> None:
    def build_const() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
        tf.reshape(x, [-1, 2, 2], name="r")

    g = v1_graph(build_const)
    out = run_pass(static_reshape, g)
    assert set(out.nodes) == set(g.nodes)
    assert out.node("r").inputs == g.node("r").inputs


def test_does_not_rewrite_when_two_sizes_are_unknown() -> None:
    def build_two() -> None:
        y = tf.compat.v1.placeholder(tf.float32, [None, None, 4], name="y")
        s = tf.shape(y)
        tf.reshape(y, tf.stack([tf.gather(s, 0), tf.gather(s, 1), 2, 2]), name="r")

    g = v1_graph(build_two)
    out = run_pass(static_reshape, g)
    assert target(out, "r") is None
    assert out.node("r").inputs == g.node("r").inputs


def test_does_not_rewrite_when_a_known_target_dim_is_zero() -> None:
    def build_zero() -> None:
        z = tf.compat.v1.placeholder(tf.float32, [None, 0, 3], name="z")
        tf.reshape(z, tf.stack([tf.gather(tf.shape(z), 0), 0]), name="r")

    g = v1_graph(build_zero)
    assert g.info(ref("r")).shape == (None, 0)
    out = run_pass(static_reshape, g)
    assert target(out, "r") is None  # [-1, 0] would be ambiguous
    feeds = {"z:0": np.zeros((3, 0, 3), np.float32)}
    assert run_ir(out, feeds)[0].shape == (3, 0)


def test_does_not_rewrite_a_fed_target() -> None:
    def build_fed() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
        target = tf.stack([tf.gather(tf.shape(x), 0), 4], name="target")
        tf.reshape(x, target, name="r")

    g = v1_graph(build_fed, inputs=["x", "target"], outputs=["r"])
    assert g.info(ref("r")).shape == (None, 4)
    out = run_pass(static_reshape, g)
    assert out.node("r").inputs == g.node("r").inputs
    feeds = {"x:0": np.ones((1, 4), np.float32), "target:0": np.int32([2, 2])}
    assert run_ir(out, feeds)[0].shape == run_ir(g, feeds)[0].shape == (2, 2)
