"""refresh-shapes: TensorFlow's shape inference again, on a copy."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from graph_helpers import ref, run_pass, v1_graph

from tf_stitch.graph.ir import DType, Node, TensorInfo, TensorRef, TensorValue
from tf_stitch.passes.refresh_shapes import refresh_shapes


def build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 6], name="x")
    shape = tf.compat.v1.placeholder(tf.int32, [2], name="shape")
    r = tf.reshape(x, shape, name="r")
    tf.nn.relu(r, name="out")


def test_sharpens_shapes_after_a_constant_target_is_put_in() -> None:
    g = v1_graph(build, inputs=["x", "shape"])
    assert g.info(ref("out")) == TensorInfo("float32", (None, None))
    edited = g.copy()
    target = np.int32([-1, 3])
    edited.add(
        Node(
            "target",
            "Const",
            attrs={"value": TensorValue(target, "int32"), "dtype": DType("int32")},
            outputs=[TensorInfo("int32", (2,))],
        )
    )
    edited.node("r").inputs[1] = TensorRef("target")
    out = run_pass(refresh_shapes, edited)
    assert out.info(ref("r")) == TensorInfo("float32", (None, 3))
    assert out.info(ref("out")) == TensorInfo("float32", (None, 3))
    assert edited.info(ref("out")) == TensorInfo("float32", (None, None))  # input untouched
    assert [n.name for n in out] == [n.name for n in edited]
    assert out.inputs == edited.inputs and out.outputs == edited.outputs


def test_replaces_wrong_infos_and_keeps_dtypes() -> None:
    g = v1_graph(build, inputs=["x", "shape"])
    g.node("out").outputs = [TensorInfo("float32", (1, 2, 3))]
    out = run_pass(refresh_shapes, g)
    assert out.info(ref("out")) == TensorInfo("float32", (None, None))
    assert out.info(ref("shape")) == TensorInfo("int32", (2,))
