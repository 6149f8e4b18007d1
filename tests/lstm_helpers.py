"""What the accumulator passes' tests share: a small Keras LSTM, its input and its loss, and
the decisions an optimized function recorded."""

from __future__ import annotations

import keras
import tensorflow as tf


def lstm(seed: int = 3) -> keras.layers.Layer:
    keras.utils.set_random_seed(seed)
    layer = keras.layers.LSTM(8)
    layer(tf.zeros([1, 5, 6]))
    return layer


X = tf.random.stateless_normal([4, 5, 6], seed=[1, 2])
SPEC = [tf.TensorSpec([None, 5, 6])]


def loss(layer: keras.layers.Layer, x: tf.Tensor) -> tf.Tensor:
    return tf.reduce_sum(tf.square(layer(x)))


def records(optimized: object, kind: str) -> list[str]:
    made = optimized.context.records  # type: ignore[attr-defined]
    return [r.decision.reason for r in made if r.subject.startswith(kind)]
