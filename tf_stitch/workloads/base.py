"""The `Workload` every benchmark module builds, and seeded helpers shared by the modules."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf


@dataclass
class Workload:
    """One inference workload: a traceable float32 `fn`, its signature and seeded inputs.

    `input_signature` has the batch dimension as None where the model allows it;
    `make_inputs(batch)` gives the seeded inputs for another batch (`inputs` is
    `make_inputs(batch)` for the batch the workload was built for); `model` holds the
    Keras model(s) or variables behind `fn`, for reference.
    """

    name: str
    fn: Callable[..., Any]
    input_signature: list[tf.TensorSpec]
    inputs: list[tf.Tensor]
    make_inputs: Callable[[int], list[tf.Tensor]]
    model: Any = None
    notes: list[str] = field(default_factory=list)


def make_workload(
    name: str,
    fn: Callable[..., Any],
    input_signature: Sequence[tf.TensorSpec],
    make_inputs: Callable[[int], list[tf.Tensor]],
    batch: int,
    model: Any = None,
) -> Workload:
    """A `Workload` whose `inputs` are `make_inputs(batch)`."""
    return Workload(name, fn, list(input_signature), make_inputs(batch), make_inputs, model)


def normal(shape: Sequence[int], seed: int, scale: float = 1.0) -> tf.Tensor:
    """Seeded standard-normal float32 tensor (stateless: the same for the same seed)."""
    return tf.random.stateless_normal(list(shape), seed=[seed, 7], dtype=tf.float32) * scale


def ids(shape: Sequence[int], vocab: int, seed: int) -> tf.Tensor:
    """Seeded int32 ids in [0, vocab)."""
    return tf.random.stateless_uniform(
        list(shape), seed=[seed, 11], minval=0, maxval=vocab, dtype=tf.int32
    )


def keras_fn(model: Any) -> Callable[..., Any]:
    """`fn(*xs)` calling a Keras model in inference mode (one input: the tensor, else a list)."""

    def fn(*xs: tf.Tensor) -> Any:
        return model(xs[0] if len(xs) == 1 else list(xs), training=False)

    return fn


def seed_keras(seed: int) -> None:
    """Seeds Keras' weight initializers (Python, NumPy and TensorFlow global seeds)."""
    import keras

    keras.utils.set_random_seed(seed)


def randomize_batch_norms(model: Any, seed: int) -> None:
    """Gives every BatchNormalization layer random (seeded) statistics, scale and offset, so that
    inference batch norm is not the identity."""
    import keras

    rng = np.random.default_rng(seed)
    for layer in model._flatten_layers(include_self=False):
        if isinstance(layer, keras.layers.BatchNormalization):
            n = layer.moving_mean.shape
            layer.moving_mean.assign(rng.normal(0.0, 0.5, n).astype("float32"))
            layer.moving_variance.assign(rng.uniform(0.5, 2.0, n).astype("float32"))
            if layer.gamma is not None:
                layer.gamma.assign(rng.uniform(0.5, 1.5, n).astype("float32"))
            if layer.beta is not None:
                layer.beta.assign(rng.normal(0.0, 0.2, n).astype("float32"))
