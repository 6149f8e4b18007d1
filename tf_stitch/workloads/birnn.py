"""A bidirectional LSTM, statically unrolled, with a per-step dense head."""

from __future__ import annotations

import tensorflow as tf

from tf_stitch.workloads.base import Workload, keras_fn, make_workload, normal, seed_keras

NAME = "birnn"
DESCRIPTION = "bidirectional LSTM unrolled 20 steps + per-step dense softmax (sequence tagging)"
BATCH = 32
STEPS = 20  # 5 with small=True


def build(batch: int = BATCH, small: bool = False, seed: int = 0) -> Workload:
    import keras

    features, units, classes = (8, 16, 5) if small else (128, 128, 32)
    steps = 5 if small else STEPS
    seed_keras(seed)
    x = keras.Input((steps, features), name="sequence")
    lstm = keras.layers.LSTM(units, unroll=True, return_sequences=True, name="lstm")
    h = keras.layers.Bidirectional(lstm, name="bilstm")(x)
    y = keras.layers.Dense(classes, activation="softmax", name="tagger")(h)
    model = keras.Model(x, y, name="birnn")

    def make_inputs(b: int) -> list[tf.Tensor]:
        return [normal([b, steps, features], seed + 100)]

    spec = [tf.TensorSpec([None, steps, features], tf.float32, name="sequence")]
    return make_workload(NAME, keras_fn(model), spec, make_inputs, batch, model)
