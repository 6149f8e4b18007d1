"""slice-views: StridedSlices that only add or drop size-1 axes become Reshapes."""

from __future__ import annotations

import tensorflow as tf
from graph_helpers import assert_same_values, ops, run_pass, v1_graph

from tf_stitch.passes.slice_views import slice_views


def test_new_axes_become_reshapes() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 6], name="x")
        m = tf.reduce_mean(x, -1)
        tf.identity(x - m[:, None] + x[None, ..., None][0, :, :, 0], name="out")

    g = v1_graph(build)
    out = run_pass(slice_views, g)
    assert ops(out)["StridedSlice"] == 0 and ops(out)["Reshape"] >= 2
    assert_same_values(g, out, batch=4)


def test_does_not_rewrite_real_slices() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 6], name="x")
        tf.identity(x[:, 1:4] * 2.0 + x[:, ::2] - x[:, 2:5], name="out")

    g = v1_graph(build)
    out = run_pass(slice_views, g)
    assert ops(out)["StridedSlice"] == ops(g)["StridedSlice"] > 0
    assert_same_values(g, out, batch=2)


def test_does_not_rewrite_when_two_sizes_are_unknown() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, None], name="x")
        tf.identity(x[:, None, :] * 2.0, name="out")

    g = v1_graph(build)
    out = run_pass(slice_views, g)
    assert ops(out)["StridedSlice"] == 1
