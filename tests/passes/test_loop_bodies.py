"""loop-bodies: the bodies of While loops are stitched like the main graph."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
from conftest import assert_close

import tf_stitch

S = tf.TensorSpec
U = tf.constant(np.random.default_rng(0).normal(size=(16, 16)).astype("float32") * 0.3)


def _loop(h: tf.Tensor) -> tf.Tensor:
    def body(i: tf.Tensor, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return i + 1, tf.sigmoid(tf.matmul(h, U)) * tf.tanh(h) + 0.1

    return tf.while_loop(lambda i, h: i < 7, body, (tf.constant(0), h))[1]


def _bodies(optimized: Any) -> dict[str, list[str]]:
    return {
        f.signature.name: [n.op for n in f.node_def]
        for f in optimized.graph_def.library.function
        if "body" in f.signature.name
    }


def test_a_loop_body_becomes_a_kernel_and_the_loop_calls_it() -> None:
    original = tf.function(_loop, input_signature=[S([None, 16])])
    optimized = tf_stitch.optimize(original)
    (ops,) = _bodies(optimized).values()  # the old body is gone from the library
    assert ops.count("StitchedKernel") == 1 and "MatMul" not in ops and "Sigmoid" not in ops
    assert any("loop" in k.schedule or "row" in k.schedule for k in optimized.kernels)
    for batch in (1, 5):
        h = tf.random.normal([batch, 16], seed=batch)
        assert_close(original(h), optimized(h))


def test_keras_lstm_steps_are_one_kernel() -> None:
    import keras

    keras.utils.set_random_seed(0)
    layer = keras.layers.LSTM(16)
    layer(np.zeros((1, 6, 8), np.float32))
    original = tf.function(lambda x: layer(x), input_signature=[S([None, 6, 8])])
    optimized = tf_stitch.optimize(original)
    (ops,) = _bodies(optimized).values()
    assert ops.count("StitchedKernel") == 1 and "MatMul" not in ops, ops
    for batch in (1, 3):
        x = tf.random.normal([batch, 6, 8], seed=batch)
        assert_close(original(x), optimized(x))


def test_a_body_with_nothing_to_stitch_is_left_as_it_is() -> None:
    def fn(x: tf.Tensor) -> tf.Tensor:
        return tf.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2.0), (0, x))[1]

    original = tf.function(fn, input_signature=[S([None, 4])])
    optimized = tf_stitch.optimize(original)
    (ops,) = _bodies(optimized).values()
    assert "StitchedKernel" not in ops
    x = tf.ones([2, 4])
    assert_close(original(x), optimized(x))


def test_matmuls_of_large_weights_stay_library_calls_in_a_loop_body() -> None:
    """A step's weights of 1 MiB each are not tiles of its kernel: every iteration would read
    them next to the step's library calls (measured slower; cost_model.py)."""
    rng = np.random.default_rng(1)
    w = tf.constant(rng.normal(size=(256, 1024)).astype("float32") * 0.05)

    def fn(h: tf.Tensor) -> tf.Tensor:
        def body(i: tf.Tensor, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            z = tf.sigmoid(tf.matmul(h, w))
            return i + 1, z[:, :256] * tf.tanh(z[:, 256:512])

        return tf.while_loop(lambda i, h: i < 3, body, (tf.constant(0), h))[1]

    original = tf.function(fn, input_signature=[S([None, 256])])
    optimized = tf_stitch.optimize(original)
    (ops,) = _bodies(optimized).values()
    assert "MatMul" in ops and "StitchedKernel" in ops, ops
    h = tf.random.normal([2, 256], seed=3)
    assert_close(original(h), optimized(h), rtol=1e-4, atol=1e-4)
