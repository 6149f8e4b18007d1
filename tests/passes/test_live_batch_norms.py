"""live-batch-norms: a convolution's batch norm of live statistics becomes a FusedBatchNormV3
that TensorFlow fuses into the convolution (one launch with the ReLU after it), on a CPU."""

from __future__ import annotations

from collections.abc import Callable

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close
from graph_helpers import assert_same_values, ops, v1_graph

from tf_stitch.launches.op_launches import count_tf_launches
from tf_stitch.passes import live_batch_norms as live_batch_norms_module
from tf_stitch.passes.base import Options, PassContext
from tf_stitch.passes.live_batch_norms import live_batch_norms

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _fused_batch_norms_pay(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rewrite itself, on any host (on some the pass leaves it: the last test)."""
    monkeypatch.setattr(live_batch_norms_module, "fused_batch_norm_pays", lambda: True)


def _stats(channels: int) -> list[tf.Tensor]:
    """mean, variance (positive), offset, scale: fed, as live variables are."""
    p = [tf.compat.v1.placeholder(tf.float32, [channels], name=n) for n in ("m", "v", "b", "g")]
    return [p[0], tf.square(p[1]) + 0.5, p[2], p[3]]


def _conv(x: tf.Tensor, channels: int) -> tf.Tensor:
    w = RNG.standard_normal((3, 3, int(x.shape[-1]), channels)).astype(np.float32)
    return tf.nn.conv2d(x, tf.constant(w), 1, "SAME")


def _keras_pattern(scale: bool, offset: bool) -> Callable[[], None]:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 6, 6, 3], name="x")
        mean, var, beta, gamma = _stats(4)
        y = tf.nn.batch_normalization(
            _conv(x, 4), mean, var, beta if offset else None, gamma if scale else None, 1e-3
        )
        tf.nn.relu(y, name="out")

    return build


def _run(graph: object, layout: str = "NHWC") -> object:
    return live_batch_norms.run(graph, PassContext(Options(conv_layout=layout)))


@pytest.mark.parametrize("scale", [True, False])
@pytest.mark.parametrize("offset", [True, False])
def test_the_batch_norm_of_a_convolution_becomes_one_fused_batch_norm(
    scale: bool, offset: bool
) -> None:
    g = v1_graph(_keras_pattern(scale, offset), outputs=["out"])
    out = _run(g)
    (bn,) = [n for n in out if n.op == "FusedBatchNormV3"]
    assert out.node(bn.inputs[0].node).op == "Conv2D"
    assert out.node("out").inputs[0] == bn.output(0)
    assert not bn.attrs["is_training"] and bn.attrs["epsilon"] == pytest.approx(1e-3)
    assert_same_values(g, out, rtol=1e-5, atol=1e-5)


def test_a_biased_convolution_s_bias_goes_into_the_mean() -> None:
    def build() -> None:  # a Keras Conv2D with its bias, then a batch norm (ResNet-50's blocks)
        x = tf.compat.v1.placeholder(tf.float32, [None, 6, 6, 3], name="x")
        mean, var, beta, gamma = _stats(4)
        bias = tf.compat.v1.placeholder(tf.float32, [4], name="bias")
        y = tf.nn.batch_normalization(_conv(x, 4) + bias, mean, var, beta, gamma, 1e-3)
        tf.nn.relu(y, name="out")

    g = v1_graph(build, outputs=["out"])
    out = _run(g)
    (bn,) = [n for n in out if n.op == "FusedBatchNormV3"]
    assert out.node(bn.inputs[0].node).op == "Conv2D"
    assert out.node(bn.inputs[3].node).op == "Sub"
    assert_same_values(g, out, rtol=1e-5, atol=1e-5)


def test_statistics_shaped_to_broadcast_are_taken_as_vectors() -> None:
    def build() -> None:  # Keras' batch norm with axis=3 (keras.applications' ResNets)
        x = tf.compat.v1.placeholder(tf.float32, [None, 6, 6, 3], name="x")
        mean, var, beta, gamma = (tf.reshape(t, [1, 1, 1, 4]) for t in _stats(4))
        y = tf.nn.batch_normalization(_conv(x, 4), mean, var, beta, gamma, 1e-3)
        tf.identity(y, name="out")

    g = v1_graph(build, outputs=["out"])
    out = _run(g)
    (bn,) = [n for n in out if n.op == "FusedBatchNormV3"]
    assert all(out.info(r).shape == (4,) for r in bn.inputs[1:])
    assert_same_values(g, out, rtol=1e-5, atol=1e-5)


def test_the_tf_batch_norm_op_decomposed_is_recomposed() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [2, 6, 6, 3], name="x")
        mean, var, beta, gamma = _stats(5)
        y, *_ = tf.compat.v1.nn.fused_batch_norm(
            _conv(x, 5), gamma, beta, mean, var, epsilon=0.01, is_training=False
        )
        tf.identity(y, name="out")

    from tf_stitch.passes.decompose_batch_norm import decompose_batch_norm

    g = v1_graph(build, outputs=["out"])
    decomposed = decompose_batch_norm.run(g, PassContext())
    assert "FusedBatchNormV3" not in ops(decomposed)
    out = _run(decomposed)
    assert ops(out)["FusedBatchNormV3"] == 1
    assert_same_values(g, out, rtol=1e-5, atol=1e-5)


def test_left_alone_for_a_gpu_a_depthwise_convolution_or_a_shared_result() -> None:
    g = v1_graph(_keras_pattern(True, True), outputs=["out"])
    assert "FusedBatchNormV3" not in ops(_run(g, "NCHW"))

    def depthwise() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [2, 6, 6, 4], name="x")
        mean, var, beta, gamma = _stats(4)
        w = tf.constant(RNG.standard_normal((3, 3, 4, 1)).astype(np.float32))
        y = tf.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "SAME")
        tf.identity(tf.nn.batch_normalization(y, mean, var, beta, gamma, 1e-3), name="out")

    def shared() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [2, 6, 6, 3], name="x")
        mean, var, beta, gamma = _stats(4)
        c = _conv(x, 4)
        tf.identity(tf.nn.batch_normalization(c, mean, var, beta, gamma, 1e-3) + c, name="out")

    def not_a_batch_norm() -> None:  # conv * s + t with s no rsqrt of a variance
        x = tf.compat.v1.placeholder(tf.float32, [2, 6, 6, 3], name="x")
        s, t = (tf.compat.v1.placeholder(tf.float32, [4], name=n) for n in "st")
        tf.identity(_conv(x, 4) * s + t, name="out")

    for build in (depthwise, shared, not_a_batch_norm):
        out = _run(v1_graph(build, outputs=["out"]))
        assert "FusedBatchNormV3" not in ops(out), build.__name__


def test_a_live_keras_batch_norm_is_one_launch_with_its_convolution_and_stays_live() -> None:
    import tf_stitch

    keras.utils.set_random_seed(0)
    inp = keras.Input((8, 8, 3))
    h = keras.layers.Conv2D(8, 3, padding="same", use_bias=False)(inp)
    h = keras.layers.ReLU()(keras.layers.BatchNormalization(axis=3)(h))
    out = keras.layers.Conv2D(4, 1)(h)
    model = keras.Model(inp, out)
    stitched = tf_stitch.optimize(model)
    assert ops(stitched.graph)["FusedBatchNormV3"] == 1
    x = tf.random.stateless_normal([2, 8, 8, 3], [3, 4])
    bn = model.layers[2]
    for seed in (1, 2):
        rng = np.random.default_rng(seed)
        for v in (bn.gamma, bn.beta, bn.moving_mean):
            v.assign(rng.normal(0.0, 1.0, v.shape).astype(np.float32))
        bn.moving_variance.assign(rng.uniform(0.5, 2.0, bn.moving_variance.shape).astype("f"))
        assert_close([stitched(x).numpy()], [model(x, training=False).numpy()])
    counted = count_tf_launches(stitched, (x,))
    # the first convolution, its batch norm and ReLU in one launch; the second with its bias
    assert counted.per_step == 2, counted.by_type


def test_where_the_fused_call_is_slow_each_batch_norm_is_stitched_and_explain_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """oneDNN on a CPU without AVX-512 runs a convolution fused with its batch norm 10x slower
    than the two apart: there the pass leaves the graph as it is, with the reason."""
    monkeypatch.setattr(live_batch_norms_module, "fused_batch_norm_pays", lambda: False)
    g = v1_graph(_keras_pattern(True, True), outputs=["out"])
    ctx = PassContext(Options())
    assert live_batch_norms.run(g, ctx) is g
    assert any(
        r.subject == "live-batch-norms" and not r.decision and "AVX-512" in r.decision.reason
        for r in ctx.records
    ), ctx.records
