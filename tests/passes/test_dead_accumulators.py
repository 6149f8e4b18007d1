"""dead-accumulators: the forward loop of a training step stops pushing what its stitched
gradient loop no longer reads; the gradients stay TensorFlow's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np
import tensorflow as tf
from lstm_helpers import SPEC, X, loss, lstm, records

import tf_stitch
from tf_stitch.launches.op_launches import count_tf_launches


def _ops(fn: Callable[..., object]) -> Counter[str]:
    return Counter(count_tf_launches(fn, [X], steps=1, warmup=1).by_type)


def test_an_lstms_gradients_keep_only_what_the_gradient_loop_reads_and_match() -> None:
    """Read-only weights: converted to values, passed through the forward loop unchanged."""
    layer = lstm()

    @tf.function(input_signature=SPEC)
    def grads(x: tf.Tensor) -> list[tf.Tensor]:
        with tf.GradientTape() as tape:
            value = loss(layer, x)
        return [value, *tape.gradient(value, layer.trainable_variables)]

    concrete = grads.get_concrete_function()
    optimized = tf_stitch.optimize(concrete)
    assert records(optimized, "dead-accumulators")
    assert records(optimized, "invariant-accumulators")
    for a, b in zip(concrete(X), optimized(X), strict=True):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-4, atol=1e-5)
    before, after = _ops(concrete), _ops(optimized)
    assert after["TensorListPushBack"] == after["TensorListPopBack"] > 0  # no push unpopped
    # 5 trips: at least the 4 shapes and the kernel weight no longer pushed, nor popped
    assert after["TensorListPushBack"] <= before["TensorListPushBack"] - 5 * 5
