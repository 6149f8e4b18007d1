"""Models for the campaign tests, named as `tests.characterize.zoo_fixtures:<function>`: a tiny
Keras model, one whose build raises, one whose process dies."""

from __future__ import annotations

import os
from typing import Any

from tf_stitch.zoo import Built, ZooEntry, keras_entry


def tiny() -> ZooEntry:
    def build() -> Any:
        import keras

        inp = keras.Input((32,), name="x")
        h = keras.layers.Dense(64, activation="relu", name="hidden")(inp)
        h = keras.layers.LayerNormalization(name="norm")(h)
        return keras.Model(inp, keras.layers.Dense(4, activation="softmax", name="out")(h))

    return keras_entry("tiny", "test", "Dense + LayerNorm + softmax", [(32,)], build)


def raising() -> ZooEntry:
    def build(seed: int) -> Built:
        raise RuntimeError("planted failure while building")

    return ZooEntry("raising", "test", "raises when built", ((4,),), ("float32",), 1, build)


def crashing() -> ZooEntry:
    def build(seed: int) -> Built:
        os.abort()  # the worker process dies as a segfault or an OOM kill would

    return ZooEntry("crashing", "test", "kills its process", ((4,),), ("float32",), 1, build)
