"""drop-pure-control-deps: control edges from side-effect-free nodes go, the others stay."""

from __future__ import annotations

import tensorflow as tf
from graph_helpers import assert_same_values, run_pass, v1_graph

from tf_stitch.graph.ir import Graph, Node, TensorInfo, TensorRef
from tf_stitch.passes.control_deps import drop_pure_control_deps


def build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
    w = tf.identity(tf.constant([1.0, 2.0, 3.0]), name="w_read")
    with tf.control_dependencies([w]):
        done = tf.no_op(name="reads_done")
    product = x * w
    with tf.control_dependencies([done, tf.nn.relu(x, name="relu_x")]):
        tf.identity(product, name="out")


def test_drops_edges_from_pure_nodes() -> None:
    g = v1_graph(build, outputs=["out"])
    assert g.node("out").control_inputs == ["reads_done", "relu_x"]
    out = run_pass(drop_pure_control_deps, g)
    assert all(not n.control_inputs for n in out)
    assert set(out.nodes) == set(g.nodes)  # nothing is removed, only edges
    assert out.outputs == g.outputs and out.inputs == g.inputs
    assert_same_values(g, out)


def test_keras_style_noop_before_the_output_identity_is_released() -> None:
    g = v1_graph(build, outputs=["out"])
    out = run_pass(drop_pure_control_deps, g)
    assert out.node("reads_done").control_inputs == []


def stateful_build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
    noise = tf.raw_ops.RandomUniform(shape=[2], dtype=tf.float32, name="noise")
    derived = tf.nn.relu(noise, name="derived")  # pure op, but downstream of a stateful one
    check = tf.debugging.check_numerics(x, "nan", name="check")
    ensure = tf.ensure_shape(x, [2], name="ensure")
    with tf.control_dependencies([noise]):
        tf.identity(x, name="after_noise")
    with tf.control_dependencies([derived]):
        tf.identity(x, name="after_derived")
    with tf.control_dependencies([check]):
        tf.identity(x, name="after_check")
    with tf.control_dependencies([ensure]):
        tf.identity(x, name="after_ensure")
    with tf.control_dependencies([tf.add(check, 1.0, name="reads_check")]):
        tf.identity(x, name="after_reads_check")


def test_does_not_drop_edges_from_stateful_or_checking_ops() -> None:
    g = v1_graph(stateful_build)
    out = run_pass(drop_pure_control_deps, g)
    assert out.node("after_noise").control_inputs == ["noise"]
    assert out.node("after_derived").control_inputs == ["derived"]
    assert out.node("after_check").control_inputs == ["check"]
    assert out.node("after_ensure").control_inputs == ["ensure"]
    assert out.node("after_reads_check").control_inputs == ["reads_check"]


def test_does_not_drop_edges_from_unregistered_ops() -> None:
    info = TensorInfo("float32", (2,))
    g = Graph()
    g.add(Node("custom", "SomeCustomOpNobodyRegistered", outputs=[info]))
    g.add(Node("after", "NoOp", control_inputs=["custom"]))
    g.targets = ["after"]
    out = run_pass(drop_pure_control_deps, g)
    assert out.node("after").control_inputs == ["custom"]
    assert out.node("custom").inputs == [] and out.targets == ["after"]
    assert TensorRef("custom") not in out.consumers()


def test_keeps_edges_that_put_constants_into_a_branch() -> None:
    def cond() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        p = tf.compat.v1.placeholder_with_default(True, [], name="p")
        _, t = tf.raw_ops.Switch(data=x, pred=p)
        pivot = tf.identity(t, name="pivot")
        with tf.control_dependencies([pivot]):
            c = tf.constant(2.0, name="c")
        tf.identity(t * c, name="out")

    g = v1_graph(cond, outputs=["out"])
    out = run_pass(drop_pure_control_deps, g)
    assert out.node("c").control_inputs == ["pivot"]
