"""split-slices: Split, SplitV and range-only StridedSlices become Slices."""

from __future__ import annotations

import tensorflow as tf
from graph_helpers import assert_same_values, ops, run_pass, v1_graph

from tf_stitch.passes.split_slices import split_slices


def test_split_and_split_v_become_slices() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 12], name="x")
        a, b, c = tf.split(x, 3, axis=1)
        d, e = tf.split(x, [5, 7], axis=-1)
        tf.identity(a * b - c + tf.reduce_sum(d, -1, keepdims=True) * e[:, :4], name="out")

    g = v1_graph(build)
    out = run_pass(split_slices, g)
    assert ops(out)["Split"] == ops(out)["SplitV"] == ops(out)["StridedSlice"] == 0
    assert ops(out)["Slice"] == 6
    assert_same_values(g, out, batch=3)


def test_negative_and_masked_bounds_of_a_strided_slice() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [4, 10], name="x")
        tf.identity(x[1:, -6:-1] * 2.0 + x[:-1, :5], name="out")

    g = v1_graph(build)
    out = run_pass(split_slices, g)
    assert ops(out)["StridedSlice"] == 0
    assert_same_values(g, out)


def test_does_not_rewrite_strides_or_new_axes() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [4, 10], name="x")
        tf.identity(x[:, ::2] + x[:, 1:2][..., None][:, :, 0] + x[None, 0:1, :5][0], name="out")

    g = v1_graph(build)
    out = run_pass(split_slices, g)
    kept = {n.name for n in out if n.op == "StridedSlice"}
    # x[:, ::2] (a stride), [..., None] and x[None, ...] (new axes) stay; x[:, 1:2], [:, :, 0]
    # and [0] (of a rank-3 tensor: the axes without bounds are whole) are rewritten
    assert kept == {"strided_slice", "strided_slice_2", "strided_slice_4"}
    assert_same_values(g, out)


def test_shrinking_slices_become_a_slice_and_a_squeeze() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 5, 6], name="x")
        tf.identity(x[:, 3] * 2.0 + x[:, -1, :][:, None, 2], name="out")

    g = v1_graph(build)
    out = run_pass(split_slices, g)
    assert ops(out)["Slice"] == 2 and ops(out)["Squeeze"] == 2
    assert ops(g)["StridedSlice"] == 3 and ops(out)["StridedSlice"] == 1  # [:, None, 2] stays
    assert_same_values(g, out)


def test_does_not_shrink_an_axis_of_unknown_size() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [4, None], name="x")
        tf.identity(x[:, -1] * 2.0, name="out")

    g = v1_graph(build)
    out = run_pass(split_slices, g)
    assert ops(out)["StridedSlice"] == 1
    assert_same_values(g, out)


def test_does_not_split_on_an_axis_of_unknown_size() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
        a, b = tf.split(x, 2, axis=0)
        tf.identity(a + b, name="out")

    g = v1_graph(build)
    out = run_pass(split_slices, g)
    assert ops(out)["Split"] == 1
