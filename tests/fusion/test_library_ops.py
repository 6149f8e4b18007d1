"""library_records: explain() says, for every library call, why the ops around it were or were
not stitched with it."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from graph_helpers import prepared

from tf_stitch.fusion.library_ops import LIBRARY_OPS
from tf_stitch.fusion.planner import plan_groups

S = tf.TensorSpec
RNG = np.random.default_rng(0)
W_BIG = tf.constant(RNG.normal(size=(512, 600)).astype("float32") * 0.05)  # > 1 MiB: a call
W_SMALL = tf.constant(RNG.normal(size=(600, 16)).astype("float32") * 0.05)  # a tile
B_BIG = tf.constant(RNG.normal(size=(600,)).astype("float32"))
FILTER = tf.constant(RNG.normal(size=(3, 3, 4, 8)).astype("float32"))


def model(x: tf.Tensor, img: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    h = tf.nn.relu(tf.matmul(x, W_BIG) + B_BIG)  # bias + relu: TensorFlow's _FusedMatMul
    logits = tf.nn.softmax(tf.matmul(h, W_SMALL))  # a small matmul: a tile of the softmax
    conv = tf.nn.conv2d(img, FILTER, 1, "SAME")
    m = tf.reduce_mean(conv, -1, keepdims=True)
    return logits, (conv - m) * tf.math.rsqrt(tf.reduce_mean(tf.square(conv - m), -1) + 1.0)


def records() -> list[str]:
    graph = prepared(model, S([None, 512]), S([None, 8, 8, 4]))
    lines = [str(r) for r in plan_groups(graph).records if r.subject.startswith("library ")]
    assert len(lines) == len([n for n in graph if n.op in LIBRARY_OPS]) == 3
    return lines


def test_every_library_call_has_one_record_with_its_neighbours() -> None:
    big, small, conv = sorted(records(), key=lambda r: ("Conv2D" in r, "allow(" in r))
    assert "(MatMul): forbid(stays a library call: large MatMul (512x600" in big
    assert "is left to TensorFlow, which fuses it" in big
    assert "(MatMul): allow(computed in kernel stitched_" in small and "matmul tile" in small
    assert "(Conv2D): forbid(stays a library call: a kernel of the library" in conv
    assert "its epilogue stitched with what follows" in conv
