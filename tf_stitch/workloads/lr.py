"""Logistic regression over normalized dense features and their pairwise crosses."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tf_stitch.workloads.base import Workload, keras_fn, make_workload, normal, seed_keras

NAME = "lr"
DESCRIPTION = "logistic regression: normalized dense features + crossed features, sigmoid"
BATCH = 8192


def build(batch: int = BATCH, small: bool = False, seed: int = 0) -> Workload:
    import keras

    features = 16 if small else 256
    half = features // 2
    seed_keras(seed)
    rng = np.random.default_rng(seed)
    mean = rng.normal(0.0, 1.0, features).astype("float32")
    variance = rng.uniform(0.5, 2.0, features).astype("float32")

    x = keras.Input((features,), name="features")
    n = keras.layers.Normalization(mean=mean, variance=variance, name="normalize")(x)
    crossed = keras.layers.Multiply(name="cross")([n[:, :half], n[:, half:]])
    feats = keras.layers.Concatenate(name="concat")([n, crossed, keras.ops.square(n)])
    y = keras.layers.Dense(1, activation="sigmoid", name="logit")(feats)
    model = keras.Model(x, y, name="lr")

    def make_inputs(b: int) -> list[tf.Tensor]:
        return [normal([b, features], seed + 100) * 1.5 + 0.3]

    spec = [tf.TensorSpec([None, features], tf.float32, name="features")]
    return make_workload(NAME, keras_fn(model), spec, make_inputs, batch, model)
