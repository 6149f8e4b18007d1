"""common-subexpressions: the same op of the same inputs is one node; what must stay apart does."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from conftest import assert_close
from graph_helpers import assert_same_values, ops, run_pass, v1_graph

import tf_stitch
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.passes.common_subexpressions import eliminate_common_subexpressions


def test_twin_activations_of_one_tensor_are_one_node() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 8], name="x")
        h = tf.exp(x) * 0.5  # 0.5 twice: two equal constants
        a = tf.nn.relu(h) * 2.0
        b = tf.nn.relu(h) * 2.0  # a chain of twins collapses in one sweep
        c = tf.nn.relu(h) + 1.0
        tf.add(a, 1.0, name="s")
        tf.add(b, c, name="t")
        tf.add(h, tf.exp(x), name="u")  # h's own Exp twin, commuted into another op
        tf.add(tf.multiply(0.5, tf.exp(x)), 1.0, name="v")  # h, its operands swapped

    g = v1_graph(build, inputs=["x"], outputs=["s", "t", "u", "v"])
    assert ops(g)["Relu"] == 3 and ops(g)["Exp"] == 3
    out = run_pass(eliminate_common_subexpressions, g)
    assert ops(out)["Relu"] == 1 and ops(out)["Exp"] == 1
    assert ops(out)["Mul"] == 2  # exp * 0.5 (v is it too) and relu * 2
    assert_same_values(g, out)


def test_fetched_stateful_and_fed_nodes_stay() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 8], name="x")
        y = tf.compat.v1.placeholder(tf.float32, [None, 8], name="y")  # x's twin placeholder
        tf.nn.relu(x, name="r1")
        tf.nn.relu(x, name="r2")  # both fetched: a caller names each
        tf.add(tf.nn.relu(x), y, name="r3")  # reads r1's value, not a fetch
        tf.add(tf.random.uniform([8], seed=1), x, name="n1")  # stateful: two draws
        tf.add(tf.random.uniform([8], seed=1), x, name="n2")

    g = v1_graph(build, inputs=["x", "y"], outputs=["r1", "r2", "r3", "n1", "n2"])
    out = run_pass(eliminate_common_subexpressions, g)
    assert {"x", "y", "r1", "r2"} <= set(out.nodes)
    assert ops(out)["Relu"] == 2 and ops(out)["RandomUniform"] == 2
    assert out.node("r3").inputs[0].node in {"r1", "r2"}


def test_control_inputs_and_attributes_tell_nodes_apart() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 8], name="x")
        tf.reduce_sum(x, axis=1, name="s1")
        tf.reduce_sum(x, axis=1, keepdims=True, name="s2")  # another attribute
        with tf.control_dependencies([tf.compat.v1.assert_positive(x)]):
            ordered = tf.reduce_sum(x, axis=1)  # after the assert
        tf.identity(ordered, name="s3")

    g = v1_graph(build, inputs=["x"], outputs=["s1", "s2", "s3"])
    out = run_pass(eliminate_common_subexpressions, g)
    assert ops(out)["Sum"] == 3


def test_a_separable_blocks_relus_are_written_once() -> None:
    """NASNet's branches each start with relu(h): one kernel output, not one per branch."""
    inputs = tf.keras.Input([12, 12, 8])
    h = tf.keras.layers.Conv2D(8, 1)(inputs)
    branches = [
        tf.keras.layers.SeparableConv2D(8, k, padding="same")(tf.keras.layers.ReLU()(h))
        for k in (3, 5, 7)
    ]
    model = tf.keras.Model(inputs, tf.keras.layers.Add()(branches))
    f = tf.function(lambda x: model(x), input_signature=[tf.TensorSpec([None, 12, 12, 8])])
    opt = tf_stitch.optimize(f)
    stitched = [n for n in opt.graph_def.node if n.op == "StitchedKernel"]
    relus = sum(n.attr["source"].s.decode().count("ts_relu(v") for n in stitched)
    relus += sum(n.op == "Relu" for n in opt.graph_def.node)
    assert relus == 1
    x = tf.constant(np.random.default_rng(0).standard_normal([2, 12, 12, 8]), tf.float32)
    assert_close(f(x), opt(x))


def test_a_value_a_variable_write_reads_keeps_its_twin() -> None:
    """The write takes its value's buffer only when nothing else reads the value."""
    f32 = [TensorInfo("float32", (4,))]

    def node(name: str, op: str, inputs: list[str], **attrs: object) -> Node:
        refs = [TensorRef.parse(i) for i in inputs]
        return Node(name, op, refs, {"T": DType("float32"), **attrs}, list(f32))

    g = Graph(
        nodes={
            n.name: n
            for n in (
                node("x", "Placeholder", []),
                node("v", "VarHandleOp", []),
                node("twice", "AddV2", ["x", "x"]),
                node("twice_again", "AddV2", ["x", "x"]),  # read by the write only
                node("write", "AssignVariableOp", ["v", "twice_again"]),
                node("out", "Exp", ["twice"]),
                node("out2", "Exp", ["twice"]),
            )
        },
        inputs=[TensorRef("x")],
        outputs=[TensorRef("out"), TensorRef("out2")],
        targets=["write"],
    )
    out = run_pass(eliminate_common_subexpressions, g)
    assert "twice_again" in out.nodes and out.node("write").inputs[1].node == "twice_again"
    assert "out2" in out.nodes  # fetched
