"""decompose-softmax: Softmax/LogSoftmax become max, sub, exp, sum and div/log."""

from __future__ import annotations

import pytest
import tensorflow as tf
from graph_helpers import assert_same_values, graph_of, ops, ref, run_pass, spec, v1_graph

from tf_stitch.graph.ir import TensorInfo
from tf_stitch.passes.decompose_softmax import decompose_softmax


@pytest.mark.parametrize("shape", [(None, 7), (2, None, 5)])
def test_softmax_becomes_primitives(shape: tuple[int | None, ...]) -> None:
    g = graph_of(lambda x: tf.nn.softmax(x) * 2.0, spec(*shape))
    name = next(n.name for n in g if n.op == "Softmax")
    out = run_pass(decompose_softmax, g)
    counts = ops(out)
    assert counts["Softmax"] == 0
    assert counts["Max"] == counts["Exp"] == counts["Sum"] == counts["RealDiv"] == 1
    final = out.node(name)  # the last op keeps the name, so readers are unchanged
    assert final.op == "RealDiv" and final.outputs == g.node(name).outputs
    assert out.outputs == g.outputs
    assert_same_values(g, out)


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16])
def test_a_16_bit_softmax_becomes_primitives_of_its_dtype(dtype: tf.DType) -> None:
    g = graph_of(lambda x: tf.nn.softmax(x), spec(None, 7, dtype=dtype))
    out = run_pass(decompose_softmax, g)
    assert ops(out)["Softmax"] == 0 and ops(out)["Exp"] == 1
    made = [n for n in out if "_decomposed" in n.name and n.op != "Const"]
    assert made and all(n.attrs["T"].name == dtype.name for n in made)
    assert all(i.dtype == dtype.name for n in made for i in n.outputs)
    assert_same_values(g, out, rtol=2e-2, atol=2e-3)  # TensorFlow rounds after each op


def test_log_softmax_becomes_primitives() -> None:
    g = graph_of(lambda x: tf.nn.log_softmax(x, axis=-1), spec(None, 6))
    name = next(n.name for n in g if n.op == "LogSoftmax")
    out = run_pass(decompose_softmax, g)
    assert ops(out)["LogSoftmax"] == 0 and ops(out)["Log"] == 1
    assert out.node(name).op == "Sub"
    axes = [n for n in out if n.name.startswith(name + "_decomposed/") and n.op == "Const"]
    assert all(a.attrs["value"].array.tolist() == [1] for a in axes)
    assert_same_values(g, out)


def test_fetched_softmax_keeps_its_name_and_device() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
        with tf.device("/device:CPU:0"):
            tf.nn.softmax(x, name="sm")

    g = v1_graph(build)
    out = run_pass(decompose_softmax, g)
    assert out.outputs == [ref("sm")] and out.node("sm").op == "RealDiv"
    new_nodes = [n for n in out if n.name not in g.nodes or n.name == "sm"]
    assert len(new_nodes) == 7 and {n.device for n in new_nodes} == {"/device:CPU:0"}
    assert out.info(ref("sm")) == TensorInfo("float32", (2, 3))
    assert_same_values(g, out)


def negatives() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
    with tf.control_dependencies([tf.no_op(name="first")]):
        tf.nn.softmax(x, name="ordered")
    gate = tf.nn.softmax(x, name="gate")
    with tf.control_dependencies([gate]):
        tf.identity(x, name="after_gate")
    tf.nn.softmax(x, name="fed")
    u = tf.compat.v1.placeholder(tf.float32, None, name="u")
    tf.raw_ops.Softmax(logits=u, name="unknown_rank")


@pytest.mark.parametrize("name", ["ordered", "gate", "fed", "unknown_rank"])
def test_does_not_decompose_when_dtype_edges_feeds_or_rank_forbid(name: str) -> None:
    g = v1_graph(negatives, inputs=["x", "u", "fed"])
    out = run_pass(decompose_softmax, g)
    assert out.node(name).op == "Softmax"
    assert not any(n.startswith(name + "_decomposed") for n in out.nodes)


def test_a_float64_softmax_is_decomposed_in_float64() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float64, [2, 3], name="x")
        tf.nn.softmax(x, name="sm")

    g = v1_graph(build)
    out = run_pass(decompose_softmax, g)
    assert out.node("sm").op == "RealDiv"
    assert out.info(ref("sm")) == TensorInfo("float64", (2, 3))
    assert_same_values(g, out)
