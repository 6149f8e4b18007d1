"""decompose-batch-norm: inference FusedBatchNorm becomes x * s + t per channel."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from graph_helpers import assert_same_values, ops, ref, run_pass, v1_graph

from tf_stitch.graph.ir import Graph
from tf_stitch.passes.decompose_batch_norm import decompose_batch_norm


def stats(channels: int, seed: int) -> tf.Tensor:
    return tf.constant(np.random.default_rng(seed).random(channels).astype(np.float32) + 0.5)


def batch_norm(
    x: tf.Tensor, fmt: str, name: str = "bn", training: bool = False, channels: int = 3
) -> tuple[tf.Tensor, ...]:
    mean, var = (None, None) if training else (stats(channels, 3), stats(channels, 4))
    return tf.compat.v1.nn.fused_batch_norm(
        x,
        stats(channels, 1),
        stats(channels, 2),
        mean,
        var,
        epsilon=0.1,
        is_training=training,
        data_format=fmt,
        name=name,
    )


@pytest.mark.parametrize(
    ("fmt", "shape", "reshapes"),
    [
        ("NHWC", [None, 4, 5, 3], 0),
        ("NCHW", [None, 3, 4, 5], 2),
        ("NDHWC", [None, 2, 3, 2, 3], 0),
        ("NCDHW", [None, 3, 2, 3, 2], 2),
    ],
)
def test_inference_batch_norm_becomes_multiply_add(fmt: str, shape: list, reshapes: int) -> None:
    def build() -> None:
        y, _, _ = batch_norm(tf.compat.v1.placeholder(tf.float32, shape, name="x"), fmt)
        tf.identity(y, name="out")

    g = v1_graph(build, outputs=["out"])
    assert g.node("bn").op == "FusedBatchNormV3"
    out = run_pass(decompose_batch_norm, g)
    assert not {"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"} & set(ops(out))
    assert out.node("bn").op == "AddV2"
    assert out.info(ref("bn")) == g.info(ref("bn"))
    assert ops(out)["Rsqrt"] == 1 and ops(out)["Reshape"] == reshapes
    eps = out.node("bn_decomposed/epsilon").attrs["value"].array
    assert eps == pytest.approx(0.1)
    assert out.outputs == [ref("out")]
    assert_same_values(g, out, rtol=1e-5, atol=1e-5)


def test_fetched_batch_norm_output_zero_is_decomposed() -> None:
    def build() -> None:
        batch_norm(tf.compat.v1.placeholder(tf.float32, [2, 2, 2, 3], name="x"), "NHWC")

    g = v1_graph(build, outputs=["bn:0"])
    out = run_pass(decompose_batch_norm, g)
    assert out.node("bn").op == "AddV2" and out.outputs == [ref("bn")]
    assert_same_values(g, out)


def negatives() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [2, 4, 4, 3], name="x")
    for fmt in ("NHWC", "NCHW"):
        xt = x if fmt == "NHWC" else tf.transpose(x, [0, 3, 1, 2])
        batch_norm(xt, fmt, name=f"training_{fmt}", training=True)
    _, mean, _ = batch_norm(x, "NHWC", name="stats_used")
    tf.identity(mean, name="reads_mean")
    batch_norm(tf.cast(x, tf.float16), "NHWC", name="half")
    with tf.control_dependencies([tf.no_op(name="first")]):
        batch_norm(x, "NHWC", name="ordered")
    gate, _, _ = batch_norm(x, "NHWC", name="gate")
    with tf.control_dependencies([gate.op]):
        tf.no_op(name="after_gate")
    batch_norm(x, "NHWC", name="fed")
    u = tf.compat.v1.placeholder(tf.float32, None, name="u")
    batch_norm(u, "NHWC", name="unknown_rank")


@pytest.fixture(scope="module")
def rewritten() -> Graph:
    return run_pass(decompose_batch_norm, v1_graph(negatives, inputs=["x", "u", "fed:0"]))


@pytest.mark.parametrize(
    "name",
    [
        "training_NHWC",
        "training_NCHW",
        "stats_used",
        "half",
        "ordered",
        "gate",
        "fed",
        "unknown_rank",
    ],
)
def test_does_not_decompose_training_used_statistics_or_unsupported_cases(
    rewritten: Graph, name: str
) -> None:
    out = rewritten
    assert out.node(name).op.startswith("FusedBatchNorm")
    assert not any(n.startswith(name + "_decomposed") for n in out.nodes)
