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
    check = tf.debugging.check_numerics(x, "nan", name="check")
    ensure = tf.ensure_shape(x, [2], name="ensure")
    with tf.control_dependencies([noise]):
        tf.identity(x, name="after_noise")
    with tf.control_dependencies([check]):
        tf.identity(x, name="after_check")
    with tf.control_dependencies([ensure]):
        tf.identity(x, name="after_ensure")


def test_does_not_drop_edges_from_stateful_or_checking_ops() -> None:
    g = v1_graph(stateful_build)
    out = run_pass(drop_pure_control_deps, g)
    assert out.node("after_noise").control_inputs == ["noise"]
    assert out.node("after_check").control_inputs == ["check"]
    assert out.node("after_ensure").control_inputs == ["ensure"]


def only_reached_by_the_edge() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
    noise = tf.raw_ops.RandomUniform(shape=[2], dtype=tf.float32, name="noise")
    check = tf.debugging.check_numerics(x, "nan", name="check")
    with tf.control_dependencies([tf.nn.relu(noise, name="derived")]):
        tf.identity(x, name="after_derived")
    with tf.control_dependencies([tf.add(check, 1.0, name="reads_check")]):
        tf.identity(x, name="after_reads_check")


def test_keeps_an_edge_without_which_an_effect_would_not_run() -> None:
    """The random draw and the check run only because of the edges from pure ops after them."""
    g = v1_graph(only_reached_by_the_edge, outputs=["after_derived", "after_reads_check"])
    out = run_pass(drop_pure_control_deps, g)
    assert out.node("after_derived").control_inputs == ["derived"]
    assert out.node("after_reads_check").control_inputs == ["reads_check"]


def test_drops_an_edge_from_a_pure_op_below_an_effect_that_runs_anyway() -> None:
    g = v1_graph(only_reached_by_the_edge, outputs=["after_derived", "noise", "check"])
    out = run_pass(drop_pure_control_deps, g)
    assert out.node("after_derived").control_inputs == []
    assert out.node("after_reads_check").control_inputs == []


def training_step() -> None:
    """Two weights read and written, with scheduling edges from a pure op that reads `a` (as
    `tf.gradients` adds them): one into a value the write of `a` computes from `a` anyway, one
    into a value that only the writes of `b` and (again) `a` read."""
    x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
    a = tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[2], shared_name="a", name="a")
    b = tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[2], shared_name="b", name="b")
    read_a = tf.raw_ops.ReadVariableOp(resource=a, dtype=tf.float32, name="read_a")
    read_b = tf.raw_ops.ReadVariableOp(resource=b, dtype=tf.float32, name="read_b")
    twice = tf.multiply(read_a, 2.0, name="a_times_2")
    with tf.control_dependencies([twice]):
        grad = tf.square(x * read_a, name="grad")  # reads a itself: the edge orders nothing
        lone = tf.identity(x, name="lone")  # reads nothing: the edge orders read_a first
    tf.raw_ops.AssignVariableOp(resource=a, value=twice + grad, name="write_a")
    tf.raw_ops.AssignVariableOp(resource=b, value=read_b + lone, name="write_b")
    with tf.control_dependencies([read_b]):
        tf.raw_ops.AssignVariableOp(resource=a, value=lone, name="write_a_again")


def test_training_step_edges_go_where_the_data_orders_the_effects_anyway() -> None:
    g = v1_graph(training_step, outputs=["a_times_2"])
    g.targets = ["write_a", "write_b", "write_a_again"]
    out = run_pass(drop_pure_control_deps, g)
    grad_x = out.node("grad").inputs[0].node
    assert out.node(grad_x).control_inputs == []  # x * read_a: write_a reads read_a anyway
    # `lone` feeds the second write of `a`, which would otherwise not wait for read_a
    assert out.node("lone").control_inputs == ["a_times_2"]
    assert out.node("write_a_again").control_inputs == ["read_b"]


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
