"""decompose-bias-add: BiasAdd becomes a broadcasting AddV2 (bias reshaped for NCHW)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from graph_helpers import assert_same_values, ops, ref, run_pass, v1_graph

from tf_stitch.graph.ir import Graph
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.decompose_bias_add import decompose_bias_add

BIAS = np.float32([1.0, -2.0, 3.0])


@pytest.mark.parametrize(
    ("fmt", "shape", "bias_shape"),
    [
        ("NHWC", [None, 4, 5, 3], None),
        ("NCHW", [None, 3, 4, 5], [-1, 1, 1]),
        ("NCHW", [None, 3, 5], [-1, 1]),
        ("NCHW", [None, 3, 2, 2, 2], [-1, 1, 1, 1]),
        ("NHWC", [None, 3], None),
    ],
)
def test_bias_add_becomes_add(fmt: str, shape: list, bias_shape: list | None) -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, shape, name="x")
        tf.nn.relu(tf.nn.bias_add(x, tf.constant(BIAS), data_format=fmt, name="ba"), name="out")

    g = v1_graph(build)
    out = run_pass(decompose_bias_add, g)
    assert out.node("ba").op == "AddV2" and ops(out)["BiasAdd"] == 0
    assert out.info(ref("ba")) == g.info(ref("ba"))
    bias_input = out.node(out.node("ba").inputs[1].node)
    if bias_shape is None:
        assert bias_input.op == "Const"
    else:
        assert bias_input.op == "Reshape"
        assert constant_value(out, bias_input.inputs[1]).tolist() == bias_shape
    assert out.outputs == [ref("out")]
    assert_same_values(g, out)


def test_bias_add_v1_becomes_add() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        tf.raw_ops.BiasAddV1(value=x, bias=tf.constant(BIAS), name="ba")

    g = v1_graph(build)
    out = run_pass(decompose_bias_add, g)
    assert out.node("ba").op == "AddV2"
    assert_same_values(g, out)


def negatives() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
    tf.nn.bias_add(tf.cast(x, tf.int32), tf.constant([1, 2, 3]), name="int")
    bias = tf.constant(BIAS)
    with tf.control_dependencies([tf.no_op(name="first")]):
        tf.nn.bias_add(x, bias, name="ordered")
    gate = tf.nn.bias_add(x, bias, name="gate")
    with tf.control_dependencies([gate]):
        tf.no_op(name="after_gate")
    tf.nn.bias_add(x, bias, name="fed")


@pytest.fixture(scope="module")
def rewritten() -> Graph:
    return run_pass(decompose_bias_add, v1_graph(negatives, inputs=["x", "fed"]))


@pytest.mark.parametrize("name", ["int", "ordered", "gate", "fed"])
def test_does_not_decompose_other_dtypes_control_edges_or_feeds(
    rewritten: Graph, name: str
) -> None:
    assert rewritten.node(name).op == "BiasAdd"
