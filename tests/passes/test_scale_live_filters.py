"""scale-live-filters: on a GPU, a convolution's batch norm of live statistics is folded into its
filter at run time, so the convolution is a fused cuDNN call again and every filter's rescale
runs in one bundled kernel."""

from __future__ import annotations

from collections.abc import Callable

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close
from graph_helpers import ops, run_graph_def, v1_graph

import tf_stitch
from tf_stitch.graph.io import graph_to_graph_def
from tf_stitch.graph.ir import Graph
from tf_stitch.passes.base import Options, PassContext
from tf_stitch.passes.scale_live_filters import scale_live_filters

RNG = np.random.default_rng(5)
STATS = ("mean", "var", "beta", "gamma", "bias", "filter")


def _build(depthwise: bool = False) -> Callable[[], None]:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 6, 6, 3], name="x")
        p = {n: tf.compat.v1.placeholder(tf.float32, [4], name=n) for n in STATS[:5]}
        if depthwise:  # 3 channels x multiplier 2 = 6 output channels
            p = {n: tf.compat.v1.placeholder(tf.float32, [6], name=n) for n in STATS[:5]}
            w = tf.compat.v1.placeholder(tf.float32, [3, 3, 3, 2], name="filter")
            conv = tf.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "SAME")
        else:
            w = tf.compat.v1.placeholder(tf.float32, [3, 3, 3, 4], name="filter")
            conv = tf.nn.conv2d(x, w, 1, "SAME")
        variance = tf.square(p["var"]) + 0.5
        y = tf.nn.batch_normalization(
            conv + p["bias"], p["mean"], variance, p["beta"], p["gamma"], 1e-3
        )
        tf.nn.relu(y, name="out")

    return build


def _run(graph: Graph, layout: str = "NCHW") -> Graph:
    return scale_live_filters.run(graph, PassContext(Options(conv_layout=layout)))


def _values(graph: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return run_graph_def(graph_to_graph_def(graph), feeds, [str(r) for r in graph.outputs])


def _feeds(graph: Graph) -> dict[str, np.ndarray]:
    return {
        f"{n.name}:0": RNG.standard_normal(
            [2 if d is None else d for d in n.outputs[0].shape]
        ).astype(np.float32)
        for n in graph
        if n.op == "Placeholder"
    }


@pytest.mark.parametrize("depthwise", [False, True])
def test_the_batch_norm_goes_into_the_filter(depthwise: bool) -> None:
    # The statistics and the filter are not graph inputs: live variables' values.
    g = v1_graph(_build(depthwise), inputs=["x:0"], outputs=["out"])
    out = _run(g)
    conv = next(n for n in out if n.op in ("Conv2D", "DepthwiseConv2dNative"))
    assert out.node(conv.inputs[1].node).op == "Mul"  # the filter times the scale
    readers = [n for n in out if conv.output(0) in n.inputs]
    assert [n.op for n in readers] == ["AddV2"]  # a bias add, fused into the call on a GPU
    assert ops(out)["Mul"] == ops(g)["Mul"] + 1  # conv * s is gone, W * s and b * s are new
    feeds = _feeds(g)
    assert_close(_values(out, feeds), _values(g, feeds), rtol=1e-4, atol=1e-4)


def test_it_leaves_a_cpu_graph_and_fed_statistics_alone() -> None:
    g = v1_graph(_build(), inputs=["x:0"], outputs=["out"])
    assert ops(_run(g, "NHWC")) == ops(g)  # a CPU's: live-batch-norms' case
    fed = v1_graph(_build(), inputs=["x:0", "var:0"], outputs=["out"])
    assert ops(_run(fed)) == ops(fed)  # the scale is computed from data, not weights


def test_a_keras_cnn_for_a_gpu_gets_fused_convolutions_and_one_rescale_kernel() -> None:
    keras.utils.set_random_seed(3)
    inp = keras.Input((8, 8, 3))
    h = inp
    for filters in (4, 8):
        h = keras.layers.Conv2D(filters, 3, padding="same")(h)
        h = keras.layers.BatchNormalization()(h)
        h = keras.layers.ReLU()(h)
    model = keras.Model(inp, keras.layers.GlobalAveragePooling2D()(h))
    for layer in model.layers:  # statistics away from 0 and 1
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.moving_mean.assign(tf.random.stateless_normal(layer.moving_mean.shape, [1, 2]))
            layer.moving_variance.assign(
                tf.random.stateless_uniform(layer.moving_variance.shape, [3, 4], 0.5, 2)
            )
    fn = tf.function(
        lambda x: model(x, training=False), input_signature=[tf.TensorSpec([None, 8, 8, 3])]
    )
    optimized = tf_stitch.optimize(fn, conv_layout="NCHW")
    # the scales and shifts (vectors) in one kernel, then both filters times them in another
    (scales,) = [k for k in optimized.kernels if any(o.endswith("AddV2:0") for o in k.outputs)]
    (filters,) = [k for k in optimized.kernels if any("convolution/Mul" in o for o in k.outputs)]
    assert scales.schedule.startswith("bundle of 2") and filters.schedule.startswith("bundle of 2")
    # the first convolution's bias add is a BiasAdd for the remapper; the last one's is
    # stitched with its ReLU and the pooling after it
    assert ops(optimized.graph)["BiasAdd"] == 1
    x = tf.random.stateless_normal([2, 8, 8, 3], [5, 6])
    assert_close([optimized(x).numpy()], [fn(x).numpy()], rtol=1e-4, atol=1e-4)
    model.layers[2].moving_mean.assign(tf.ones([4]))  # live: the next call sees it
    assert_close([optimized(x).numpy()], [fn(x).numpy()], rtol=1e-4, atol=1e-4)
