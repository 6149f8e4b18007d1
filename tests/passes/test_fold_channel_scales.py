"""fold-channel-scales: per-channel constant scales of matmul and convolution results go into
the weights; what is left is one bias add."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from graph_helpers import assert_same_values, ops, run_pass, v1_graph

from tf_stitch.passes.fold_channel_scales import fold_channel_scales

RNG = np.random.default_rng(7)


def _c(*shape: int) -> tf.Tensor:
    return tf.constant(RNG.standard_normal(shape).astype(np.float32))


def _conv_bias_scale_shift() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 6, 6, 3], name="x")
    y = tf.nn.conv2d(x, _c(3, 3, 3, 4), 1, "SAME") + _c(4)
    tf.nn.relu(y * _c(4) + _c(4), name="out")


def _depthwise_scale() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [2, 6, 6, 3], name="x")
    y = tf.nn.depthwise_conv2d(x, _c(3, 3, 3, 2), [1, 1, 1, 1], "SAME")
    tf.identity(y * _c(6), name="out")


def _matmul_scale(transpose_b: bool) -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 5], name="x")
    w = _c(7, 5) if transpose_b else _c(5, 7)
    tf.identity(tf.matmul(x, w, transpose_b=transpose_b) * _c(1, 7) + 0.5, name="out")


def test_a_batch_norm_after_a_biased_convolution_becomes_one_bias_add() -> None:
    g = v1_graph(_conv_bias_scale_shift, outputs=["out"])
    out = run_pass(fold_channel_scales, g)
    assert ops(out)["Mul"] == 0 and ops(out)["AddV2"] == 1
    assert_same_values(g, out, rtol=1e-5, atol=1e-5)


def test_depthwise_output_channels_are_input_times_multiplier() -> None:
    g = v1_graph(_depthwise_scale, outputs=["out"])
    out = run_pass(fold_channel_scales, g)
    assert ops(out)["Mul"] == 0 and ops(out)["AddV2"] == 0
    assert_same_values(g, out, rtol=1e-5, atol=1e-5)


def test_matmuls_either_way_round() -> None:
    for transpose_b in (False, True):
        g = v1_graph(lambda t=transpose_b: _matmul_scale(t), outputs=["out"])
        out = run_pass(fold_channel_scales, g)
        assert ops(out)["Mul"] == 0
        assert_same_values(g, out, rtol=1e-5, atol=1e-5)


def test_does_not_fold_a_result_read_twice_or_a_scale_that_is_not_a_constant() -> None:
    def read_twice() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 5], name="x")
        y = tf.matmul(x, _c(5, 7))
        tf.identity(y * _c(7), name="out")
        tf.identity(y + 1.0, name="other")

    def fed_scale() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 5], name="x")
        s = tf.compat.v1.placeholder(tf.float32, [7], name="s")
        tf.identity(tf.matmul(x, _c(5, 7)) * s, name="out")

    def spatial_scale() -> None:  # a scale per position, not per channel
        x = tf.compat.v1.placeholder(tf.float32, [2, 4, 4, 3], name="x")
        tf.identity(tf.nn.conv2d(x, _c(1, 1, 3, 2), 1, "SAME") * _c(4, 1, 1), name="out")

    for build, outputs in ((read_twice, ["out", "other"]), (fed_scale, ["out"])):
        g = v1_graph(build, outputs=outputs)
        assert ops(run_pass(fold_channel_scales, g))["Mul"] == 1
    g = v1_graph(spatial_scale, outputs=["out"])
    assert ops(run_pass(fold_channel_scales, g))["Mul"] == 1
