"""NodeBuilder: typed nodes under one scope and device, importable by TensorFlow."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from conftest import assert_close
from graph_helpers import run_ir, v1_graph

from tf_stitch.graph.ir import DType, Graph, TensorInfo
from tf_stitch.passes.builder import NodeBuilder, keepdims_shape


def placeholder_graph() -> Graph:
    def build() -> None:
        tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")

    return v1_graph(build)


def test_const_names_types_and_uniqueness() -> None:
    g = placeholder_graph()
    b = NodeBuilder(g, "s", "/device:CPU:0")
    first = b.const([1, 2], "int64")
    second = b.const(2.5, "float32")
    assert (first.node, second.node) == ("s/const", "s/const_1")
    node = g.node(first.node)
    assert node.attrs["dtype"] == DType("int64") and node.device == "/device:CPU:0"
    assert node.attrs["value"].array.dtype == np.int64
    assert node.outputs == [TensorInfo("int64", (2,))]
    assert g.node(second.node).outputs == [TensorInfo("float32", ())]


def test_ops_build_a_graph_tensorflow_runs() -> None:
    g = placeholder_graph()
    b = NodeBuilder(g, "scope")
    x = g.node("x").output(0)
    s = b.reduce("Sum", x, [1], (2, 1))
    e = b.unary("Exp", x, (2, 3))
    out = b.binary("RealDiv", e, s, (2, 3), name="result")
    assert out.node == "result" and g.node("result").attrs["T"] == DType("float32")
    assert g.node(s.node).attrs["keep_dims"] is True
    assert g.node(s.node).inputs[1].node == "scope/sum_axes"
    g.outputs = [out, s]
    xv = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    got = run_ir(g, {"x:0": xv})
    assert_close([np.exp(xv) / xv.sum(1, keepdims=True), xv.sum(1, keepdims=True)], got, rtol=1e-6)


def test_op_with_explicit_attrs_and_base_name() -> None:
    g = placeholder_graph()
    b = NodeBuilder(g, "v")
    shape = b.const([3, 2], "int32", base="shape")
    ref = b.op(
        "Reshape",
        [g.node("x").output(0), shape],
        TensorInfo("float32", (3, 2)),
        {"T": DType("float32"), "Tshape": DType("int32")},
        base="view",
    )
    assert ref.node == "v/view" and g.node(ref.node).inputs[1].node == "v/shape"
    g.outputs = [ref]
    got = run_ir(g, {"x:0": np.arange(6, dtype=np.float32).reshape(2, 3)})
    assert got[0].shape == (3, 2)


def test_keepdims_shape() -> None:
    assert keepdims_shape((2, 3, 4), [2]) == (2, 3, 1)
    assert keepdims_shape((None, 3), [0, 1]) == (1, 1)
    assert keepdims_shape(None, [0]) is None
