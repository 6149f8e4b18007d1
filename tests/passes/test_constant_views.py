"""fold-constant-views: Reshape/ExpandDims/Squeeze of constants become constants."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from graph_helpers import assert_same_values, ops, ref, run_pass, v1_graph

from tf_stitch.graph.ir import TensorInfo
from tf_stitch.passes.constant_views import fold_constant_views

GAMMA = np.arange(6, dtype=np.float32)


def build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 2, 3], name="x")
    gamma = tf.constant(GAMMA, name="gamma")
    r = tf.reshape(gamma, [1, 2, 3], name="r")
    e = tf.expand_dims(tf.constant([1.0, 2.0, 3.0], name="beta"), 0, name="e")
    s = tf.squeeze(tf.constant([[[0.5]]], name="half"), name="s")
    tf.add(x * r + e, s, name="out")


def test_folds_views_of_constants() -> None:
    g = v1_graph(build, outputs=["out"])
    out = run_pass(fold_constant_views, g)
    for name in ("r", "e", "s"):
        assert out.node(name).op == "Const", name
    np.testing.assert_array_equal(out.node("r").attrs["value"].array, GAMMA.reshape(1, 2, 3))
    assert out.node("r").outputs == [TensorInfo("float32", (1, 2, 3))]
    assert out.node("e").outputs == [TensorInfo("float32", (1, 3))]
    assert out.node("s").outputs == [TensorInfo("float32", ())]
    assert ops(out)["Reshape"] == ops(out)["ExpandDims"] == ops(out)["Squeeze"] == 0
    assert out.outputs == [ref("out")]
    assert_same_values(g, out)


def negatives_build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [4], name="x")
    c = tf.constant([1.0, 2.0, 3.0, 4.0], name="c")
    tf.reshape(x, [2, 2], name="of_placeholder")
    target = tf.constant([2, 2], name="target")
    tf.reshape(c, target, name="fed_view")
    with tf.control_dependencies([x]):
        tf.reshape(c, target, name="ordered")
    shape = tf.compat.v1.placeholder(tf.int32, [2], name="shape")
    tf.reshape(c, shape, name="dynamic_shape")


def test_does_not_fold_when_data_is_not_constant_or_view_is_fed_or_ordered() -> None:
    g = v1_graph(negatives_build, inputs=["x", "shape", "fed_view"])
    out = run_pass(fold_constant_views, g)
    assert g.node("ordered").control_inputs == ["x"]
    for name in ("of_placeholder", "fed_view", "ordered", "dynamic_shape"):
        assert out.node(name).op == "Reshape", name


def big_build() -> None:
    big = tf.constant(np.ones(1 << 17, np.float32), name="big")
    tf.reshape(big, [2, -1], name="shared_view")
    tf.negative(big, name="other_reader")
    small = tf.constant(np.ones(8, np.float32), name="small")
    tf.reshape(small, [2, 4], name="small_view")
    tf.negative(small, name="small_reader")


def test_does_not_copy_a_large_constant_that_is_read_elsewhere() -> None:
    g = v1_graph(big_build)
    out = run_pass(fold_constant_views, g)
    assert out.node("shared_view").op == "Reshape"
    assert out.node("small_view").op == "Const"  # small constants may be copied
    assert out.node("small").op == "Const"


def test_folds_a_large_constant_read_only_by_the_view() -> None:
    def build_unshared() -> None:
        big = tf.constant(np.ones(1 << 17, np.float32), name="big")
        tf.reshape(big, [2, -1], name="view")

    out = run_pass(fold_constant_views, v1_graph(build_unshared))
    assert out.node("view").op == "Const"
    assert out.node("view").attrs["value"].array.shape == (2, 1 << 16)


def test_does_not_fold_a_view_of_a_fed_constant() -> None:
    def build_fed() -> None:
        tf.reshape(tf.constant([1.0, 2.0, 3.0, 4.0], name="c"), [2, 2], name="view")

    g = v1_graph(build_fed, inputs=["c"], outputs=["view"])
    out = run_pass(fold_constant_views, g)
    assert out.node("view").op == "Reshape"
    assert_same_values(g, out)
