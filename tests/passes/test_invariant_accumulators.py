"""invariant-accumulators: a training step's forward loop gives its gradient loop the values
that are the same on every trip once; gradients and updates stay TensorFlow's, and a variable
written between the two loops keeps its accumulator."""

from __future__ import annotations

from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf
from lstm_helpers import SPEC, X, loss, lstm, records

import tf_stitch


def _sgd_step(layer: keras.layers.Layer, between: bool) -> Callable[[tf.Tensor], tf.Tensor]:
    """A training step that writes the weights after the gradient; with `between`, it also
    writes the recurrent kernel between the forward loop and the gradient loop."""

    def step(x: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            value = loss(layer, x)
        if between:
            layer.cell.recurrent_kernel.assign(layer.cell.recurrent_kernel * 0.5)
        for v, g in zip(
            layer.trainable_variables, tape.gradient(value, layer.trainable_variables), strict=True
        ):
            v.assign_sub(0.01 * g)
        return value

    return step


def _train(stitch: bool, between: bool) -> tuple[list[float], list[np.ndarray], object]:
    layer = lstm()
    step = _sgd_step(layer, between)
    fn = (
        tf_stitch.function(step, input_signature=SPEC)
        if stitch
        else tf.function(step, input_signature=SPEC)
    )
    losses = [float(fn(X)) for _ in range(3)]
    optimized = fn.get_optimized(X) if stitch else None
    return losses, [w.numpy() for w in layer.weights], optimized


def _follows_tensorflow(between: bool) -> object:
    """Trains 3 steps both ways: the same losses and weights; the optimized function."""
    expected, weights, _ = _train(False, between)
    got, got_weights, optimized = _train(True, between)
    np.testing.assert_allclose(got, expected, rtol=1e-4)
    for a, b in zip(weights, got_weights, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
    return optimized


def _invariant_reads(optimized: object) -> list[object]:
    graph = optimized.graph  # type: ignore[attr-defined]
    return [n for n in graph if n.name.endswith("invariant_read")]


def test_a_training_step_reads_an_unwritten_weight_once_after_the_forward_loop() -> None:
    optimized = _follows_tensorflow(between=False)
    reasons = records(optimized, "invariant-accumulators")
    assert reasons and "once" in reasons[0]
    reads = _invariant_reads(optimized)
    assert reads and all(n.op == "ReadVariableOp" and n.control_inputs for n in reads)


def test_a_weight_written_between_the_loops_keeps_its_accumulator() -> None:
    assert not _invariant_reads(_follows_tensorflow(between=True))
