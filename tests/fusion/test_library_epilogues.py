"""Bias adds and activations of matmuls and convolutions are left to TensorFlow where its
remapper fuses them into the library call (one launch), and stitched where it does not."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close

import tf_stitch
from tf_stitch.fusion.legality import has_cpu_only_epilogues
from tf_stitch.fusion.planner import PlannerOptions, plan_groups
from tf_stitch.graph.frontends import load

RNG = np.random.default_rng(3)
S = tf.TensorSpec


def _c(*shape: int) -> tf.Tensor:
    return tf.constant(RNG.standard_normal(shape).astype(np.float32))


W, B = _c(512, 640), _c(640)  # a library call (too large for a tile)
SMALL_W, SMALL_B = _c(16, 32), _c(32)  # a tile: the kernel computes matmul, bias, activation
K, KB = _c(3, 3, 4, 8), _c(8)
D, DB = _c(3, 3, 4, 1), _c(4)


def _matmul(act: Callable[[tf.Tensor], tf.Tensor]) -> Callable[[tf.Tensor], tf.Tensor]:
    return lambda x: act(tf.matmul(x, W) + B)


def _conv(act: Callable[[tf.Tensor], tf.Tensor]) -> Callable[[tf.Tensor], tf.Tensor]:
    return lambda x: act(tf.nn.conv2d(x, K, 1, "SAME") + KB)


def _depthwise(act: Callable[[tf.Tensor], tf.Tensor]) -> Callable[[tf.Tensor], tf.Tensor]:
    return lambda x: act(tf.nn.depthwise_conv2d(x, D, [1, 1, 1, 1], "SAME") + DB)


MATMUL_IN, IMAGE = S([None, 512]), S([None, 8, 8, 4])
CASES = [
    ("matmul_relu", _matmul(tf.nn.relu), MATMUL_IN, 0),
    ("matmul_sigmoid", _matmul(tf.sigmoid), MATMUL_IN, 0),
    ("conv_leaky_relu", _conv(tf.nn.leaky_relu), IMAGE, 0),
    ("conv_relu6", _conv(tf.nn.relu6), IMAGE, 0),
    ("depthwise_elu", _depthwise(tf.nn.elu), IMAGE, 0),
    # TensorFlow does not fuse these with the call: a kernel of the epilogue
    ("conv_tanh", _conv(tf.tanh), IMAGE, 1),
    ("depthwise_sigmoid", _depthwise(tf.sigmoid), IMAGE, 1),
    ("matmul_relu_then_scale", lambda x: tf.nn.relu(tf.matmul(x, W) + B) * 2.0, MATMUL_IN, 1),
    # a small matmul too: its tile would be one launch, as TensorFlow's fused call is
    ("tile_relu", lambda x: tf.nn.relu(tf.matmul(x, SMALL_W) + 1.0), S([None, 16]), 0),
]


@pytest.mark.parametrize(("name", "fn", "spec", "groups"), CASES, ids=[c[0] for c in CASES])
def test_epilogues_tensorflow_fuses_are_left_to_it(
    name: str, fn: Callable[[tf.Tensor], tf.Tensor], spec: S, groups: int
) -> None:
    plan = plan_groups(load(tf.function(fn).get_concrete_function(spec)).graph)
    assert len(plan.groups) == groups
    if groups == 0:
        assert any("fuses those into the library call" in str(r) for r in plan.records)


@pytest.mark.parametrize(
    "case", [0, 2, 5, 8], ids=["matmul_relu", "conv_leaky_relu", "conv_tanh", "tile_relu"]
)
@pytest.mark.usefixtures("kernel_cache")
def test_never_more_launches_than_tensorflow(case: int) -> None:
    _, fn, spec, _ = CASES[case]
    f = tf.function(fn, input_signature=[spec])
    optimized = tf_stitch.optimize(f)
    x = tf.random.normal([2, *spec.shape[1:]], seed=case)
    assert_close(f(x), optimized(x), rtol=1e-4, atol=1e-4)
    launches = tf_stitch.count_launches(optimized, x)
    assert launches.tf_stitch <= launches.tf, launches


def test_a_matmul_s_relu_mask_goes_with_the_gradient_not_into_the_matmul() -> None:
    """A training step's ReLU gradient reads the activation the next layer reads too: a
    kernel of the matmul (a tile), its bias, ReLU and the mask would replace TensorFlow's
    fused library call; the mask goes with the gradient that uses it instead."""
    w1, b1, w2 = _c(256, 256), _c(256), _c(256, 8)  # a large first layer (a small one: a tile)

    def fn(x: tf.Tensor, dy: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        h = tf.nn.relu(tf.matmul(x, w1) + b1)
        out = tf.matmul(h, w2)
        dh = tf.matmul(dy, w2, transpose_b=True) * tf.cast(h > 0, tf.float32)
        return out, dh

    plan = plan_groups(
        load(tf.function(fn).get_concrete_function(S([None, 256]), S([None, 8]))).graph
    )
    grouped = {n.op for g in plan.groups for n in g.nodes}
    assert "MatMul" not in grouped and "Relu" not in grouped  # TensorFlow's fused call
    (mask,) = [g for g in plan.groups if any(n.op == "Greater" for n in g.nodes)]
    assert {n.op for n in mask.nodes} >= {"Greater", "Cast", "Mul"}  # with the gradient
    assert any("keeps a matmul and its fused epilogue" in str(r) for r in plan.records)


def _tile_sigmoid(x: tf.Tensor) -> tf.Tensor:
    return tf.sigmoid(tf.matmul(x, SMALL_W) + SMALL_B)  # a recommender's output layer


@pytest.mark.parametrize(
    ("fn", "gpu_groups"),
    [(_tile_sigmoid, 1), (CASES[1][1], 1), (CASES[8][1], 0)],
    ids=["tile_sigmoid", "matmul_sigmoid", "tile_relu"],
)
def test_on_a_gpu_only_relu_is_the_library_s(fn: Callable[..., tf.Tensor], gpu_groups: int) -> None:
    """TensorFlow's GPU remapper fuses only a ReLU with a matmul and its bias add: planned for
    a GPU, any other activation is stitched (with a small matmul as its tile, or with the bias
    add of a large one), where on a CPU oneDNN's fused call takes it."""
    spec = S([None, 16]) if fn is not CASES[1][1] else MATMUL_IN
    graph = load(tf.function(fn).get_concrete_function(spec)).graph
    assert plan_groups(graph).groups == []
    assert has_cpu_only_epilogues(graph) is (gpu_groups == 1)
    groups = plan_groups(graph, PlannerOptions(gpu=True)).groups
    assert len(groups) == gpu_groups
    if fn is _tile_sigmoid:
        assert {n.op for n in groups[0].nodes} >= {"MatMul", "Sigmoid"}


@pytest.mark.usefixtures("kernel_cache")
def test_a_gpu_counts_the_graph_planned_for_it() -> None:
    """count_launches' GPU count is of the graph optimized for a GPU: there the output layer's
    sigmoid is stitched with its matmul (one launch), where TensorFlow's GPU runs two."""
    f = tf.function(_tile_sigmoid, input_signature=[S([None, 16])])
    x = tf.random.normal([4, 16], seed=7)
    optimized = tf_stitch.optimize(f)
    assert optimized.kernels == []  # on this CPU, oneDNN's fused call is the one launch
    launches = tf_stitch.count_launches(optimized, x)
    assert launches.gpu_optimized is not None and launches.gpu_optimized is not optimized
    assert_close(f(x), launches.gpu_optimized(x), rtol=1e-5, atol=1e-5)
    assert launches.tf_gpu == 2 and launches.tf_stitch_gpu == 1, launches
