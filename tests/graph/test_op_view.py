"""graph_of_function: a traced function's ops as IR nodes, without freezing it."""

from __future__ import annotations

import tensorflow as tf

from tf_stitch.graph.op_view import graph_of_function


def test_ops_dtypes_shapes_and_layout_attributes_without_freezing() -> None:
    w = tf.Variable(tf.ones([3, 3, 2, 4]))

    @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 2])])
    def fn(x: tf.Tensor) -> tf.Tensor:
        y = tf.nn.conv2d(x, w, 1, "SAME", name="conv")
        return tf.cast(tf.shape(y)[0], tf.float32) + tf.einsum("bhwc->bc", y, name="pool")

    graph = graph_of_function(fn.get_concrete_function())
    conv = graph.node("conv")
    assert conv.op == "Conv2D" and conv.attrs["data_format"] == b"NHWC"
    assert conv.outputs[0].dtype == "float32" and conv.outputs[0].shape == (None, 8, 8, 4)
    (einsum,) = [n for n in graph if n.op == "Einsum"]
    assert einsum.attrs["equation"] == b"bhwc->bc"
    assert graph.node("Shape").outputs[0].dtype == "int32"
    assert any(n.op == "ReadVariableOp" for n in graph)  # the variable is read, not frozen
    assert graph.topological_order()  # every input is a node of the view
    assert [graph.node(r.node).op for r in graph.outputs] == ["Identity"]
