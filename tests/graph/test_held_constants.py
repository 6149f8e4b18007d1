"""Large weights are given to TensorFlow by reference; convolution filters stay constants."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close
from graph_helpers import spec, v1_graph

import tf_stitch
from tf_stitch.graph.held_constants import HELD_ELEMENTS, held_constants

RNG = np.random.default_rng(0)


def _weights(*shape: int) -> tf.Tensor:
    return tf.constant(RNG.standard_normal(shape).astype(np.float32), name="w")


def test_large_weights_are_held_filters_small_and_framed_constants_are_not() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [1, 8, 8, 256], name="x")
        filt = tf.constant(RNG.standard_normal([3, 3, 256, 8]).astype(np.float32), name="filt")
        conv = tf.nn.conv2d(x, filt, 1, "SAME", name="conv")
        dense = tf.constant(RNG.standard_normal([8, 4096]).astype(np.float32), name="dense")
        bias = tf.constant(RNG.standard_normal([4096]).astype(np.float32), name="bias")
        y = tf.matmul(tf.reshape(conv, [-1, 8]), dense) + bias
        with tf.control_dependencies([y.op]):
            framed = tf.constant(RNG.standard_normal([4096]).astype(np.float32), name="framed")
        tf.identity(y + tf.reshape(framed, [4096]), name="out")

    graph = v1_graph(build, ["x:0"], ["out:0"])
    held = held_constants(graph)
    assert set(held) == {"dense"}
    assert held["dense"].array.shape == (8, 4096)
    assert graph.node("bias").outputs[0].num_elements() < HELD_ELEMENTS


def test_an_optimized_function_holds_its_matmul_weights_by_reference() -> None:
    w1, w2 = _weights(256, 512), _weights(512, 256)

    @tf.function(input_signature=[spec(None, 256)])
    def mlp(x: tf.Tensor) -> tf.Tensor:
        return tf.nn.softmax(tf.nn.relu(x @ w1) @ w2 * 0.5)

    optimized = tf_stitch.optimize(mlp)
    fdef = optimized.flat_fn.function_def
    consts = [n for n in fdef.node_def if n.op == "Const"]
    assert all(len(n.attr["value"].tensor.tensor_content) < 4 * HELD_ELEMENTS for n in consts)
    assert len(optimized.flat_fn.captured_inputs) == 2
    # The GraphDef a user reads still has the weights as constants.
    big = [
        n
        for n in optimized.graph_def.node
        if n.op == "Const" and len(n.attr["value"].tensor.tensor_content) == 4 * 256 * 512
    ]
    assert len(big) == 2
    x = tf.constant(RNG.standard_normal([3, 256]).astype(np.float32))
    assert_close([mlp(x)], [optimized(x)])


def test_eager_constant_freezes_the_array_it_may_share_and_keeps_the_dtype() -> None:
    from tf_stitch.graph.callable import eager_constant

    array = RNG.standard_normal([64, 64]).astype(np.float32)
    tensor = eager_constant(array, "float32")
    assert tensor.dtype == tf.float32 and np.array_equal(tensor.numpy(), array)
    with pytest.raises(ValueError, match="read-only"):
        array[0, 0] = 1e6  # TensorFlow may share its memory
    assert eager_constant(np.arange(4), "int32").dtype == tf.int32  # converted where it differs
    half = eager_constant(np.ones([2], np.float32), "bfloat16")
    assert half.dtype == tf.bfloat16 and float(half[1]) == 1.0
