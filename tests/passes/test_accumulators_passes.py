"""dead-accumulators and invariant-accumulators: the forward loop of a training step stops
pushing what its stitched gradient loop no longer reads, and gives the gradient loop the values
that are the same on every trip once; gradients and updates stay TensorFlow's, and a variable
written between the two loops keeps its accumulator."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

import tf_stitch
from tf_stitch.profiler.op_launches import count_tf_launches


def _lstm(seed: int = 3) -> keras.layers.Layer:
    keras.utils.set_random_seed(seed)
    layer = keras.layers.LSTM(8)
    layer(tf.zeros([1, 5, 6]))
    return layer


X = tf.random.stateless_normal([4, 5, 6], seed=[1, 2])
SPEC = [tf.TensorSpec([None, 5, 6])]


def _loss(layer: keras.layers.Layer, x: tf.Tensor) -> tf.Tensor:
    return tf.reduce_sum(tf.square(layer(x)))


def _records(optimized: object, kind: str) -> list[str]:
    records = optimized.context.records  # type: ignore[attr-defined]
    return [r.decision.reason for r in records if r.subject.startswith(kind)]


def _ops(fn: Callable[..., object]) -> Counter[str]:
    return Counter(count_tf_launches(fn, [X], steps=1, warmup=1).by_type)


def test_an_lstms_gradients_keep_only_what_the_gradient_loop_reads_and_match() -> None:
    """Read-only weights: converted to values, passed through the forward loop unchanged."""
    layer = _lstm()

    @tf.function(input_signature=SPEC)
    def grads(x: tf.Tensor) -> list[tf.Tensor]:
        with tf.GradientTape() as tape:
            loss = _loss(layer, x)
        return [loss, *tape.gradient(loss, layer.trainable_variables)]

    concrete = grads.get_concrete_function()
    optimized = tf_stitch.optimize(concrete)
    assert _records(optimized, "dead-accumulators")
    assert _records(optimized, "invariant-accumulators")
    for a, b in zip(concrete(X), optimized(X), strict=True):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-4, atol=1e-5)
    before, after = _ops(concrete), _ops(optimized)
    assert after["TensorListPushBack"] == after["TensorListPopBack"] > 0  # no push unpopped
    # 5 trips: at least the 4 shapes and the kernel weight no longer pushed, nor popped
    assert after["TensorListPushBack"] <= before["TensorListPushBack"] - 5 * 5


def _sgd_step(layer: keras.layers.Layer, between: bool) -> Callable[[tf.Tensor], tf.Tensor]:
    """A training step that writes the weights after the gradient; with `between`, it also
    writes the recurrent kernel between the forward loop and the gradient loop."""

    def step(x: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = _loss(layer, x)
        if between:
            layer.cell.recurrent_kernel.assign(layer.cell.recurrent_kernel * 0.5)
        for v, g in zip(
            layer.trainable_variables, tape.gradient(loss, layer.trainable_variables), strict=True
        ):
            v.assign_sub(0.01 * g)
        return loss

    return step


def _train(stitch: bool, between: bool) -> tuple[list[float], list[np.ndarray], object]:
    layer = _lstm()
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
    reasons = _records(optimized, "invariant-accumulators")
    assert reasons and "once" in reasons[0]
    reads = _invariant_reads(optimized)
    assert reads and all(n.op == "ReadVariableOp" and n.control_inputs for n in reads)


def test_a_weight_written_between_the_loops_keeps_its_accumulator() -> None:
    assert not _invariant_reads(_follows_tensorflow(between=True))
