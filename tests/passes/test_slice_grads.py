"""slice-grads: the gradients of slices that tile a tensor are summed as one concatenation; a
gap, an overlap or an axis of unknown size leaves TensorFlow's StridedSliceGrads."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close
from graph_helpers import ops, run_pass

import tf_stitch
from tf_stitch.graph.frontends import load
from tf_stitch.passes.slice_grads import slice_grads

S = tf.TensorSpec
W = tf.constant(np.random.default_rng(5).standard_normal([5, 8]).astype(np.float32))


def _gradient(loss: Callable[[tf.Tensor], tf.Tensor]) -> Callable[[tf.Tensor], tf.Tensor]:
    def fn(x: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = loss(x)
        return tape.gradient(y, x)

    return fn


def _steps(steps: range) -> Callable[[tf.Tensor], tf.Tensor]:
    """An unrolled recurrence's loss: x[:, t] for each t of `steps` (x: [batch, 5, 8])."""

    def loss(x: tf.Tensor) -> tf.Tensor:
        h = tf.zeros_like(x[:, 0])
        for t in steps:
            h = tf.tanh(x[:, t] * W[t] + h)
        return tf.reduce_sum(h * h)

    return loss


def _halves(x: tf.Tensor) -> tf.Tensor:
    """A gate's pre-activation cut in two (x: [batch, 16]), and a third slice overlapping
    them (left alone: the sum is no longer a tiling of x)."""
    gate = tf.reduce_sum(tf.sigmoid(x[:, :8]) * tf.tanh(x[:, 8:]))
    return gate + tf.reduce_sum(x[:, 3:5] * x[:, 3:5])


SEQ, VEC = S([None, 5, 8]), S([None, 16])
CASES = [
    ("every_step", _steps(range(5)), SEQ, {"Pack": 1}),
    ("steps_reversed", _steps(range(4, -1, -1)), SEQ, {"Pack": 1}),
    ("a_gap", _steps(range(0, 5, 2)), SEQ, {"StridedSliceGrad": 3}),
    ("unknown_length", _steps(range(5)), S([None, None, 8]), {"StridedSliceGrad": 5}),
    ("halves", _halves, VEC, {"ConcatV2": 1, "StridedSliceGrad": 2}),  # x[:, 3:5] twice: overlaps
]


@pytest.mark.parametrize(("name", "loss", "spec", "expect"), CASES, ids=[c[0] for c in CASES])
def test_slices_that_tile_a_tensor_are_summed_as_one_concatenation(
    name: str, loss: Callable[[tf.Tensor], tf.Tensor], spec: S, expect: dict[str, int]
) -> None:
    graph = load(tf.function(_gradient(loss)).get_concrete_function(spec)).graph
    out = ops(run_pass(slice_grads, graph))
    for op, count in expect.items():
        assert out[op] == count, (name, out)
    if "StridedSliceGrad" not in expect:
        assert out["StridedSliceGrad"] == 0


@pytest.mark.parametrize("case", [0, 1, 2, 4], ids=[CASES[i][0] for i in (0, 1, 2, 4)])
@pytest.mark.usefixtures("kernel_cache")
def test_the_optimized_gradient_matches_tensorflow(case: int) -> None:
    _, loss, spec, _ = CASES[case]
    f = tf.function(_gradient(loss), input_signature=[spec])
    x = tf.random.normal([3, *spec.shape[1:]], seed=case)
    assert_close(f(x), tf_stitch.optimize(f)(x), rtol=1e-5, atol=1e-6)
