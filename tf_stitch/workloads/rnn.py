"""An LSTM statically unrolled over 20 steps, with a dense head on the last state."""

from __future__ import annotations

import tensorflow as tf

from tf_stitch.workloads.base import Workload, keras_fn, make_workload, normal, seed_keras

NAME = "rnn"
DESCRIPTION = "LSTM unrolled 20 steps (Keras LSTM, unroll=True) + dense softmax head"
BATCH = 64
STEPS = 20  # 5 with small=True


def build(batch: int = BATCH, small: bool = False, seed: int = 0) -> Workload:
    import keras

    features, units, classes = (8, 16, 5) if small else (256, 256, 10)
    steps = 5 if small else STEPS
    seed_keras(seed)
    x = keras.Input((steps, features), name="sequence")
    h = keras.layers.LSTM(units, unroll=True, name="lstm")(x)
    y = keras.layers.Dense(classes, activation="softmax", name="head")(h)
    model = keras.Model(x, y, name="rnn")

    def make_inputs(b: int) -> list[tf.Tensor]:
        return [normal([b, steps, features], seed + 100)]

    spec = [tf.TensorSpec([None, steps, features], tf.float32, name="sequence")]
    return make_workload(NAME, keras_fn(model), spec, make_inputs, batch, model)
