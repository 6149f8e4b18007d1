"""The GPU model of convolutions: the layout optimizer's transposes and fused library calls."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tf_stitch.graph.ir import Graph, Node, TensorInfo, TensorRef
from tf_stitch.graph.op_view import graph_of_function
from tf_stitch.launches.gpu_layout import converted_ops, fused_call_kernels, layout_transposes

S = tf.TensorSpec
F = tf.constant(np.ones([3, 3, 4, 4], np.float32))


def _graph(fn: object, *specs: tf.TensorSpec) -> Graph:
    return graph_of_function(tf.function(fn).get_concrete_function(*specs))


def test_a_chain_of_convolutions_is_transposed_once_in_and_once_out() -> None:
    def fn(x: tf.Tensor) -> tf.Tensor:
        y = tf.nn.relu(tf.nn.conv2d(x, F, 1, "SAME") + 1.0)
        return tf.nn.max_pool2d(tf.nn.conv2d(y, F, 1, "SAME"), 2, 2, "VALID")

    graph = _graph(fn, S([None, 8, 8, 4]))
    assert {"Conv2D", "AddV2", "Relu", "MaxPool"} <= {
        graph.node(n).op for n in converted_ops(graph)
    }
    assert layout_transposes(graph) == 2  # the image in, the result out


def test_an_op_the_optimizer_does_not_know_between_convolutions_costs_two() -> None:
    def fn(x: tf.Tensor) -> tf.Tensor:
        y = tf.nn.conv2d(x, F, 1, "SAME")
        y = tf.reshape(tf.reshape(y, [-1, 4]), tf.shape(y))  # not layout-agnostic
        return tf.nn.conv2d(y, F, 1, "SAME")

    assert layout_transposes(_graph(fn, S([None, 8, 8, 4]))) == 4


def test_a_spatial_reduction_leaves_a_layout_free_result() -> None:
    def fn(x: tf.Tensor) -> tf.Tensor:
        return tf.reduce_mean(tf.nn.relu(tf.nn.conv2d(x, F, 1, "SAME")), [1, 2])

    assert layout_transposes(_graph(fn, S([None, 8, 8, 4]))) == 1  # only the image in


def _chain(*ops: str) -> Graph:
    graph = Graph()
    prev: list[TensorRef] = []
    for i, op in enumerate(("Placeholder", *ops)):
        node = Node(f"n{i}", op, list(prev), {}, [TensorInfo("float32", (2, 4))])
        graph.add(node)
        prev = [node.output(0)]
    return graph


def test_fused_calls_keep_a_bias_add_and_relu_and_launch_the_rest() -> None:
    assert fused_call_kernels(_chain("Conv2D", "BiasAdd", "Relu"), "n3") == 1
    assert fused_call_kernels(_chain("Conv2D", "BiasAdd"), "n2") == 1
    assert fused_call_kernels(_chain("Conv2D", "FusedBatchNormV3", "Relu"), "n3") == 3
    assert fused_call_kernels(_chain("MatMul", "BiasAdd", "Tanh"), "n3") == 2
    assert fused_call_kernels(_chain("MatMul", "BiasAdd"), "missing") == 2
