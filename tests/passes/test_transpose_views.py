"""transpose-views: transposes that only move size-1 axes are reshapes."""

from __future__ import annotations

import tensorflow as tf
from graph_helpers import assert_same_values, ops, run_pass, v1_graph

from tf_stitch.passes.transpose_views import transpose_views


def test_moving_size_one_axes_is_a_reshape() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 6, 1], name="x")
        y = tf.transpose(x, [0, 2, 1])  # [B, 1, 6]: same memory order
        tf.identity(tf.transpose(tf.exp(y), [0, 2, 1]), name="out")

    g = v1_graph(build)
    out = run_pass(transpose_views, g)
    assert not ops(out)["Transpose"] and ops(out)["Reshape"] == 2
    assert_same_values(g, out)


def test_real_transposes_and_two_unknown_sizes_stay() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 6, 4], name="x")
        tf.identity(tf.transpose(x, [0, 2, 1]), name="out")  # reorders 6 and 4
        z = tf.compat.v1.placeholder(tf.float32, [None, None, 1], name="z")
        tf.identity(tf.transpose(z, [0, 2, 1]), name="out2")  # a view, but two unknown sizes

    g = v1_graph(build)
    out = run_pass(transpose_views, g)
    assert ops(out)["Transpose"] == 2
    assert_same_values(g, out)
