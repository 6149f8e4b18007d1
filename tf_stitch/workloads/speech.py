"""DeepSpeech2-style speech model: Conv2D front end with BatchNorm + ReLU, unrolled GRUs."""

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

NAME = "speech"
DESCRIPTION = "2x (Conv2D + BatchNorm + ReLU) over a spectrogram, 2 unrolled GRUs, CTC softmax"
BATCH = 8


def build(batch: int = BATCH, small: bool = False, seed: int = 0) -> Workload:
    import keras

    frames, bins, channels, units, chars = (24, 16, 4, 16, 10) if small else (96, 64, 32, 256, 29)
    seed_keras(seed)
    x = keras.Input((frames, bins), name="spectrogram")
    h = keras.layers.Reshape((frames, bins, 1), name="add_channel")(x)
    for i, (kernel, stride) in enumerate((((11, 21), (2, 2)), ((11, 11), (2, 2)))):
        h = keras.layers.Conv2D(
            channels, kernel, stride, padding="same", use_bias=False, name=f"conv{i}"
        )(h)
        h = keras.layers.BatchNormalization(name=f"bn{i}")(h)
        h = keras.layers.ReLU(max_value=20.0, name=f"clipped_relu{i}")(h)
    steps = frames // 4
    h = keras.layers.Reshape((steps, (bins // 4) * channels), name="to_sequence")(h)
    for i in range(2):
        h = keras.layers.GRU(units, unroll=True, return_sequences=True, name=f"gru{i}")(h)
        h = keras.layers.BatchNormalization(name=f"gru_bn{i}")(h)
    y = keras.layers.Dense(chars, activation="softmax", name="ctc_probs")(h)
    model = keras.Model(x, y, name="speech")
    randomize_batch_norms(model, seed)

    def make_inputs(b: int) -> list[tf.Tensor]:
        return [normal([b, frames, bins], seed + 100)]

    spec = [tf.TensorSpec([None, frames, bins], tf.float32, name="spectrogram")]
    return make_workload(NAME, keras_fn(model), spec, make_inputs, batch, model)
