"""pointwise-matmuls: 1x1 convolutions of 1x1 images (squeeze-and-excitation) become matmuls;
every other convolution stays one."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from graph_helpers import assert_same_values, ops, run_pass, v1_graph

import tf_stitch
from tf_stitch.passes.pointwise_matmuls import pointwise_matmuls

RNG = np.random.default_rng(11)


def _c(*shape: int) -> tf.Tensor:
    return tf.constant(RNG.standard_normal(shape).astype(np.float32))


def _squeeze_excite() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 5, 5, 8], name="x")
    s = tf.reduce_mean(x, [1, 2], keepdims=True)
    s = tf.nn.silu(tf.nn.conv2d(s, _c(1, 1, 8, 2), 1, "SAME") + _c(2))
    s = tf.sigmoid(tf.nn.conv2d(s, _c(1, 1, 2, 8), 1, "VALID") + _c(8))
    tf.identity(x * s, name="out")


def test_squeeze_and_excitation_convolutions_become_matmuls() -> None:
    g = v1_graph(_squeeze_excite, outputs=["out"])
    out = run_pass(pointwise_matmuls, g)
    assert ops(out)["Conv2D"] == 0 and ops(out)["MatMul"] == 2
    assert_same_values(g, out, rtol=1e-5, atol=1e-5)


def test_other_convolutions_stay() -> None:
    def spatial() -> None:  # a 1x1 filter over a 5x5 image
        x = tf.compat.v1.placeholder(tf.float32, [None, 5, 5, 8], name="x")
        tf.identity(tf.nn.conv2d(x, _c(1, 1, 8, 4), 1, "SAME"), name="out")

    def wide_filter() -> None:  # a 3x3 filter over a 1x1 image (SAME padding)
        x = tf.compat.v1.placeholder(tf.float32, [None, 1, 1, 8], name="x")
        tf.identity(tf.nn.conv2d(x, _c(3, 3, 8, 4), 1, "SAME"), name="out")

    def fed_filter() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 1, 1, 8], name="x")
        w = tf.compat.v1.placeholder(tf.float32, [1, 1, 8, 4], name="w")
        tf.identity(tf.nn.conv2d(x, w, 1, "SAME"), name="out")

    for build in (spatial, wide_filter, fed_filter):
        g = v1_graph(build, outputs=["out"])
        assert ops(run_pass(pointwise_matmuls, g))["Conv2D"] == 1


def test_a_squeeze_excite_block_optimizes_to_the_same_values() -> None:
    @tf.function(input_signature=[tf.TensorSpec([None, 5, 5, 8])])
    def block(x: tf.Tensor) -> tf.Tensor:
        s = tf.reduce_mean(x, [1, 2], keepdims=True)
        s = tf.nn.silu(tf.nn.conv2d(s, w1, 1, "SAME") + b1)
        return x * tf.sigmoid(tf.nn.conv2d(s, w2, 1, "SAME") + b2)

    w1, b1, w2, b2 = _c(1, 1, 8, 2), _c(2), _c(1, 1, 2, 8), _c(8)
    optimized = tf_stitch.optimize(block)
    x = tf.constant(RNG.standard_normal([3, 5, 5, 8]).astype(np.float32))
    np.testing.assert_allclose(optimized(x).numpy(), block(x).numpy(), rtol=1e-4, atol=1e-5)
    assert not any("Conv2D" in n.op for n in optimized.graph_def.node)
