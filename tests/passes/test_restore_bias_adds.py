"""restore-bias-adds: adds of a channel vector to library results that TensorFlow runs are
BiasAdds again, so Grappler keeps a block's last Relu fused with its convolution."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from graph_helpers import assert_same_values, ops, run_pass, v1_graph

import tf_stitch
from tf_stitch.passes.restore_bias_adds import restore_bias_adds

RNG = np.random.default_rng(5)


def _c(*shape: int) -> tf.Tensor:
    return tf.constant(RNG.standard_normal(shape).astype(np.float32))


def _conv_block() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 3], name="x")
    y = tf.nn.relu(tf.nn.conv2d(x, _c(3, 3, 3, 4), 1, "SAME") + _c(4))
    tf.identity(tf.nn.max_pool2d(y, 2, 2, "VALID"), name="out")


def test_a_channel_vector_added_to_a_convolution_is_a_bias_add() -> None:
    g = v1_graph(_conv_block, outputs=["out"])
    out = run_pass(restore_bias_adds, g)
    assert ops(out)["BiasAdd"] == 1 and ops(out)["AddV2"] == 0
    assert_same_values(g, out, rtol=1e-6, atol=1e-6)


def test_a_channel_bias_of_an_nchw_convolution_is_an_nchw_bias_add() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3, 8, 8], name="x")
        y = tf.nn.conv2d(x, _c(3, 3, 3, 4), 1, "SAME", data_format="NCHW")
        tf.identity(tf.nn.relu(y + _c(1, 4, 1, 1)), name="out")
        tf.identity(y + _c(1, 1, 1, 8)[..., :1], name="broadcast")  # [1, 1, 1, 1]: not a bias

    g = v1_graph(build, outputs=["out", "broadcast"])
    out = run_pass(restore_bias_adds, g)
    (bias,) = [n for n in out if n.op == "BiasAdd"]
    assert bias.attrs["data_format"] == b"NCHW"
    assert out.info(bias.inputs[1]).shape == (4,)
    assert_same_values(g, out, rtol=1e-6, atol=1e-6)


def test_other_adds_stay() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
        y = tf.matmul(x, _c(4, 3))
        tf.identity(y + _c(2, 3)[:1], name="row")  # a [1, 3] constant: a broadcast, not a bias
        tf.identity(y + x[:, :3], name="residual")  # not a constant
        tf.identity(x + _c(4), name="no_library")

    g = v1_graph(build, outputs=["row", "residual", "no_library"])
    assert ops(run_pass(restore_bias_adds, g))["BiasAdd"] == 0


def test_a_vgg_block_runs_its_convolution_bias_and_relu_as_one_launch() -> None:
    @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 3])])
    def block(x: tf.Tensor) -> tf.Tensor:
        y = tf.nn.relu(tf.nn.conv2d(x, w, 1, "SAME") + b)
        return tf.nn.max_pool2d(y, 2, 2, "VALID") * 2.0 + 1.0

    w, b = _c(3, 3, 3, 4), _c(4)
    optimized = tf_stitch.optimize(block)
    x = tf.constant(RNG.standard_normal([2, 8, 8, 3]).astype(np.float32))
    np.testing.assert_allclose(optimized(x).numpy(), block(x).numpy(), rtol=1e-5, atol=1e-5)
    report = tf_stitch.count_launches(optimized, x)
    assert "Relu" not in report.tf_stitch_detail.by_type  # fused with the convolution


def test_a_live_variable_s_bias_is_a_bias_add_and_a_fed_vector_is_not() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 5], name="x")
        bias = tf.compat.v1.placeholder(tf.float32, [3], name="bias")  # a live variable's value
        fed = tf.compat.v1.placeholder(tf.float32, [3], name="fed")
        y = tf.matmul(x, _c(5, 3))
        tf.identity(tf.nn.relu(y + bias), name="out")
        tf.identity(tf.matmul(x, _c(5, 3)) + fed, name="other")

    # `bias` is not among the graph's inputs, as a live variable's Placeholder is not
    g = v1_graph(build, inputs=["x:0", "fed:0"], outputs=["out", "other"])
    out = run_pass(restore_bias_adds, g)
    assert ops(out)["BiasAdd"] == 1 and ops(out)["AddV2"] == 1
    (bias_add,) = [n for n in out if n.op == "BiasAdd"]
    assert bias_add.inputs[1].node == "bias"
