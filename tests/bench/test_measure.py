"""measure.py's reference check: how far TensorFlow's own frozen graph is from the function."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tf_stitch.bench.measure import _frozen_error


def test_frozen_error_is_zero_for_a_well_conditioned_function_and_large_for_a_chaotic_one() -> None:
    w = tf.Variable(tf.random.stateless_normal([16, 16], seed=[1, 2]))

    @tf.function(input_signature=[tf.TensorSpec([None, 16])])
    def f(x: tf.Tensor) -> tf.Tensor:
        return tf.nn.softmax(tf.tanh(x @ w))

    x = tf.random.stateless_normal([4, 16], seed=[3, 4])
    expected = [f(x).numpy()]
    assert _frozen_error(f.get_concrete_function(), [x], expected) < 1e-6
    # Against outputs that are not the function's, the difference is reported, not hidden.
    wrong = [np.roll(expected[0], 1, axis=-1)]
    assert _frozen_error(f.get_concrete_function(), [x], wrong) > 1e-3
