"""CRNN text recognition: conv + BatchNorm + pooling, columns as a sequence, BiLSTM, softmax."""

from __future__ import annotations

import tensorflow as tf

from tf_stitch.workloads.base import (
    Workload,
    keras_fn,
    make_workload,
    normal,
    randomize_batch_norms,
    seed_keras,
)

NAME = "crnn"
DESCRIPTION = "CRNN: 3x (Conv2D + BatchNorm + ReLU + MaxPool), BiLSTM unrolled 32 steps, softmax"
BATCH = 8


def build(batch: int = BATCH, small: bool = False, seed: int = 0) -> Workload:
    import keras
    from keras import layers

    height, width = (16, 32) if small else (32, 128)
    channels = (4, 8, 8) if small else (32, 64, 128)
    units, classes = (8, 11) if small else (128, 37)
    seed_keras(seed)
    x = keras.Input((height, width, 1), name="image")
    h = x
    pools = ((2, 2), (2, 2), (2, 1))  # the last pool keeps the width: one column per step
    for i, (c, pool) in enumerate(zip(channels, pools, strict=True)):
        h = layers.Conv2D(c, 3, padding="same", use_bias=False, name=f"conv{i}")(h)
        h = layers.BatchNormalization(name=f"bn{i}")(h)
        h = layers.ReLU(name=f"relu{i}")(h)
        h = layers.MaxPooling2D(pool, name=f"pool{i}")(h)
    rows, steps = height // 8, width // 4
    h = layers.Permute((2, 1, 3), name="columns")(h)  # [B, W', H', C]
    h = layers.Reshape((steps, rows * channels[-1]), name="to_sequence")(h)
    lstm = layers.LSTM(units, unroll=True, return_sequences=True, name="lstm")
    h = layers.Bidirectional(lstm, name="bilstm")(h)
    y = layers.Dense(classes, activation="softmax", name="chars")(h)
    model = keras.Model(x, y, name="crnn")
    randomize_batch_norms(model, seed)

    def make_inputs(b: int) -> list[tf.Tensor]:
        return [normal([b, height, width, 1], seed + 100)]

    spec = [tf.TensorSpec([None, height, width, 1], tf.float32, name="image")]
    return make_workload(NAME, keras_fn(model), spec, make_inputs, batch, model)
