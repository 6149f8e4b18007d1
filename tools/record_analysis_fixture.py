"""Records the small real profile the analysis tests read:
`python tools/record_analysis_fixture.py` (rewrites tests/profiler/fixtures/recorded/).

A Keras model of Conv2D + BatchNormalization + ReLU, a depthwise convolution, global average
pooling and a Dense layer, profiled by `tf_stitch.profile` at batch 2 for 4 steps. The tests
assert exact numbers of this recording; after re-recording, update them.
"""

from __future__ import annotations

import io
from pathlib import Path

import keras
import tensorflow as tf

import tf_stitch

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "profiler" / "fixtures" / "recorded"


def model() -> keras.Model:
    keras.utils.set_random_seed(0)
    inp = keras.Input((16, 16, 3), name="image")
    x = keras.layers.Conv2D(4, 3, name="conv")(inp)
    x = keras.layers.BatchNormalization(name="bn")(x)
    x = keras.layers.ReLU(name="relu")(x)
    x = keras.layers.DepthwiseConv2D(3, name="dw")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    return keras.Model(inp, keras.layers.Dense(5, name="dense")(x), name="small_cnn")


def main() -> None:
    x = tf.random.stateless_normal([2, 16, 16, 3], seed=[0, 1])
    p = tf_stitch.profile(model(), [x], steps=4, warmup=1, progress=io.StringIO())
    p.save(FIXTURE, "small_cnn")
    print(p.summary())


if __name__ == "__main__":
    main()
