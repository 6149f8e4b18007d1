"""nchw-layout: for a GPU, convolutions and the layout-agnostic ops after them run in NCHW, with a
transpose only where a tensor crosses between the layouts; the values never change."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from graph_helpers import assert_same_values, fingerprint, ops, v1_graph

from tf_stitch.graph.ir import Graph
from tf_stitch.passes.base import Options, PassContext
from tf_stitch.passes.nchw_layout import nchw_layout
from tf_stitch.passes.transpose_views import transpose_views

RNG = np.random.default_rng(11)


def _c(*shape: int) -> tf.Tensor:
    return tf.constant(RNG.standard_normal(shape).astype(np.float32))


def _nchw(graph: Graph) -> Graph:
    before = fingerprint(graph)
    out = nchw_layout.run(graph, PassContext(Options(conv_layout="NCHW")))
    assert fingerprint(graph) == before, "nchw-layout modified its input graph"
    return out


def _formats(graph: Graph) -> set[bytes]:
    return {n.attrs["data_format"] for n in graph if "data_format" in n.attrs}


def _cnn() -> None:
    """A bit of every kind: convolutions (strided, dilated, depthwise, transposed), bias adds,
    a batch norm, poolings, pads, a residual add, squeeze-excite with a computed [N, 1, 1, C]
    scale, a channel concat, a global mean, and a flatten that must see NHWC."""
    x = tf.compat.v1.placeholder(tf.float32, [None, 12, 12, 3], name="x")
    y = tf.nn.bias_add(tf.nn.conv2d(x, _c(3, 3, 3, 8), 2, "SAME"), _c(8))
    y = tf.compat.v1.nn.fused_batch_norm(
        y, _c(8), _c(8), _c(8), tf.abs(_c(8)) + 0.5, is_training=False
    )[0]
    y = tf.nn.relu6(y)
    z = tf.nn.conv2d(y, _c(3, 3, 8, 8), 1, "SAME", dilations=2)
    y = tf.nn.relu(z + y)
    se = tf.reduce_mean(y, [1, 2], keepdims=True)
    se = tf.sigmoid(tf.reshape(tf.matmul(tf.reshape(se, [-1, 8]), _c(8, 8)), [-1, 1, 1, 8]))
    y = y * se + _c(8)
    y = tf.pad(y, [[0, 0], [1, 1], [0, 2], [0, 0]])
    y = tf.nn.max_pool2d(y, 2, 2, "VALID")
    d = tf.nn.depthwise_conv2d(y, _c(3, 3, 8, 1), [1, 1, 1, 1], "SAME")
    y = tf.concat([tf.nn.avg_pool2d(y, 1, 1, "VALID"), tf.nn.elu(d)], axis=-1)
    up = tf.nn.conv2d_transpose(y, _c(2, 2, 4, 16), [2, 8, 8, 4], 2, "SAME")
    tf.identity(tf.reshape(up, [2, -1]), name="flat")
    tf.identity(tf.reduce_max(y, [1, 2]), name="pooled")
    tf.identity(tf.reduce_sum(y, 3), name="channels")  # [N, H, W] in either layout


def test_a_cnn_runs_in_nchw_with_transposes_only_at_its_edges() -> None:
    g = v1_graph(_cnn, outputs=["flat", "pooled", "channels"])
    out = _nchw(g)
    assert _formats(out) == {b"NCHW"}
    # one transpose in (the image), one out (the flatten reads NHWC); the squeeze-excite's
    # [N, C, 1, 1] <-> [N, 1, 1, C] cross too, but only move size-1 axes: views
    views = transpose_views.run(out, PassContext())
    transposes = sorted(n.name for n in views if n.op == "Transpose")
    assert transposes == ["conv2d_transpose/to_nhwc", "x/to_nchw"]
    assert ops(out)["Conv2DBackpropInput"] == 1
    assert_same_values(g, out, batch=2, rtol=1e-4, atol=1e-4)
    assert_same_values(g, views, batch=2, rtol=1e-4, atol=1e-4)


def test_a_reduction_keeping_one_spatial_axis_stays_nhwc() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [1, 6, 5, 4], name="x")
        y = tf.nn.relu(tf.nn.conv2d(x, _c(1, 1, 4, 4), 1, "SAME"))
        tf.identity(tf.reduce_sum(y, 1), name="rows")  # [N, W, C] vs [N, C, W]

    g = v1_graph(build, outputs=["rows"])
    out = _nchw(g)
    summed = next(n for n in out if n.op == "Sum")
    assert out.node(summed.inputs[0].node).op == "Transpose"
    assert_same_values(g, out, rtol=1e-5, atol=1e-5)


def test_what_it_leaves_alone() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [1, 6, 6, 4], name="x")
        h = tf.compat.v1.placeholder(tf.float16, [1, 6, 6, 4], name="h")
        tf.identity(tf.nn.conv2d(h, tf.cast(_c(1, 1, 4, 4), tf.float16), 1, "SAME"), name="half")
        tf.identity(tf.nn.relu(x), name="no_conv")

    g = v1_graph(build, outputs=["half", "no_conv"])
    out = nchw_layout.run(g, PassContext(Options(conv_layout="NCHW")))
    assert _formats(out) == {b"NHWC"}  # float16 convolutions keep NHWC (tensor cores)
    cpu = nchw_layout.run(v1_graph(_cnn, outputs=["flat"]), PassContext())
    assert _formats(cpu) <= {b"NHWC"}


def test_options_refuse_an_unknown_layout() -> None:
    with pytest.raises(ValueError, match="conv_layout"):
        Options(conv_layout="NWHC")
