"""The models of `benchmarks/real_models.py`, built from configuration with public code
(keras.applications, keras_hub, Keras layers), seeded random weights, nothing downloaded.

Each builder returns a `RealModel`: the function to optimize (the model called with
`training=False`), its input signature and one batch of seeded random inputs.

Weights: Keras initializes biases, batch-norm shifts and moving means to zeros and scales and
moving variances to ones. Frozen, such constants are folded away by Grappler (x + 0 -> x), which
no trained model allows, and then the remapper has no bias add to fuse with a convolution. So
by default every variable that holds a single repeated value is redrawn around it (zeros ->
N(0, 0.05), c -> c * U(0.8, 1.2)), as training would leave it; `keras_init=True` keeps
Keras' initial values.

Batch-norm statistics are then those of the activations the layer sees (`calibrate_batch_norm`),
as after training: one forward pass in training mode on another seeded batch of the same
distribution, with momentum 0 and dropout off, sets each moving mean and variance to its batch's.
Random statistics make deep residual networks grow their activations block by block
(EfficientNet-V2-M's pooled features reach 1.6e7, where TensorFlow's own frozen graph gives
another class than the function), which no trained model does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf


@dataclass
class RealModel:
    name: str
    description: str
    fn: Callable[..., Any]
    signature: list[tf.TensorSpec]
    inputs: list[tf.Tensor]
    model: Any  # kept alive: `fn` reads its variables


def trained_like(model: Any, seed: int) -> int:
    """Redraws every float variable of `model` whose elements are all equal (see the module
    docstring). Returns how many were redrawn."""
    rng = np.random.default_rng(seed)
    count = 0
    for v in model.weights:
        value = np.asarray(v.numpy())
        if not np.issubdtype(value.dtype, np.floating) or value.size < 2:
            continue
        first = value.flat[0]
        if not np.all(value == first):
            continue
        if first == 0:
            new = rng.normal(0.0, 0.05, value.shape)
        else:
            new = first * rng.uniform(0.8, 1.2, value.shape)
        v.assign(new.astype(value.dtype))
        count += 1
    return count


def _layers(layer: Any) -> list[Any]:
    out = [layer]
    for sub in getattr(layer, "layers", []):
        out += _layers(sub)
    return out


def calibrate_batch_norm(model: Any, inputs: list[tf.Tensor]) -> int:
    """Sets every BatchNormalization's moving statistics to those of its input on `inputs`
    (see the module docstring). Returns how many layers were calibrated."""
    import keras

    layers = {id(x): x for x in _layers(model)}.values()
    norms = [x for x in layers if isinstance(x, keras.layers.BatchNormalization)]
    drops = [x for x in layers if isinstance(x, keras.layers.Dropout)]
    if not norms:
        return 0
    saved = [x.momentum for x in norms], [x.rate for x in drops]
    try:
        for x in norms:
            x.momentum = 0.0
        for x in drops:
            x.rate = 0.0
        model(inputs if len(inputs) > 1 else inputs[0], training=True)
    finally:
        for x, m in zip(norms, saved[0], strict=True):
            x.momentum = m
        for x, r in zip(drops, saved[1], strict=True):
            x.rate = r
    return len(norms)


def _call(model: Any, many: bool) -> Callable[..., Any]:
    if many:
        return lambda *xs: model(list(xs), training=False)
    return lambda x: model(x, training=False)


def _image_model(arch: str, batch: int, size: int) -> Callable[[int, bool], RealModel]:
    def build(seed: int, keras_init: bool) -> RealModel:
        import keras

        keras.utils.set_random_seed(seed)
        model = getattr(keras.applications, arch)(weights=None, input_shape=(size, size, 3))
        x = tf.random.stateless_uniform([batch, size, size, 3], [seed, 0], 0.0, 255.0)
        if not keras_init:
            trained_like(model, seed)
            calibration = [seed + 1, 0]
            calibrate_batch_norm(
                model, [tf.random.stateless_uniform([4, size, size, 3], calibration, 0.0, 255.0)]
            )
        return RealModel(
            arch,
            f"keras.applications.{arch}, {size}x{size}, batch {batch}",
            _call(model, False),
            [tf.TensorSpec([None, size, size, 3])],
            [x],
            model,
        )

    return build


def dlrm(
    seed: int,
    keras_init: bool,
    *,
    batch: int = 8,
    dense_features: int = 13,
    tables: int = 26,
    vocab: int = 1000,
    dim: int = 16,
) -> RealModel:
    """A DLRM-style recommender (Naumov et al., 2019) in Keras layers: a bottom MLP on the dense
    features, one embedding table per categorical feature, the pairwise dot products of all
    embeddings (the strict upper triangle), a top MLP."""
    import keras
    from keras import layers, ops

    keras.utils.set_random_seed(seed)
    dense = keras.Input((dense_features,), name="dense_features")
    ids = keras.Input((tables,), dtype="int32", name="sparse_ids")
    bottom = dense
    for width in (512, 256, dim):
        bottom = layers.Dense(width, activation="relu")(bottom)
    embedded = [
        layers.Embedding(vocab, dim, name=f"table_{t}")(ids[:, t : t + 1]) for t in range(tables)
    ]
    features = layers.Concatenate(axis=1)([layers.Reshape((1, dim))(bottom), *embedded])
    dots = ops.matmul(features, ops.transpose(features, (0, 2, 1)))  # [B, F, F]
    rows, cols = np.triu_indices(tables + 1, k=1)
    flat = ops.reshape(dots, (-1, (tables + 1) ** 2))
    pairs = ops.take(flat, rows * (tables + 1) + cols, axis=1)
    top = layers.Concatenate()([bottom, pairs])
    for width in (512, 256):
        top = layers.Dense(width, activation="relu")(top)
    out = layers.Dense(1, activation="sigmoid")(top)
    model = keras.Model([dense, ids], out, name="dlrm")
    if not keras_init:
        trained_like(model, seed)
    inputs = [
        tf.random.stateless_normal([batch, dense_features], [seed, 0]),
        tf.random.stateless_uniform([batch, tables], [seed, 1], 0, vocab, tf.int32),
    ]
    return RealModel(
        "DLRM",
        f"DLRM-style, {dense_features} dense + {tables} tables of {vocab}x{dim}, batch {batch}",
        _call(model, True),
        [tf.TensorSpec([None, dense_features]), tf.TensorSpec([None, tables], tf.int32)],
        inputs,
        model,
    )


def t5(seed: int, keras_init: bool, *, batch: int = 1, length: int = 64) -> RealModel:
    """keras_hub's T5Backbone in T5-small's configuration (6+6 layers, 512 wide, 8 heads, ReLU
    feed-forward), encoder and decoder over `length` tokens."""
    import keras

    try:
        import keras_hub
    except ImportError as e:
        raise SystemExit(
            "t5_small needs keras_hub: pip install -e '.[bench]' (or leave it out with --only)"
        ) from e
    keras.utils.set_random_seed(seed)
    model = keras_hub.models.T5Backbone(
        vocabulary_size=32128,
        num_layers=6,
        num_heads=8,
        hidden_dim=512,
        intermediate_dim=2048,
        key_value_dim=64,
        dropout=0.0,
        activation="relu",
        use_gated_activation=False,
        layer_norm_epsilon=1e-6,
        tie_embedding_weights=True,
    )
    if not keras_init:
        trained_like(model, seed)
    names = [
        "decoder_padding_mask",
        "decoder_token_ids",
        "encoder_padding_mask",
        "encoder_token_ids",
    ]
    values = {
        "decoder_padding_mask": tf.ones([batch, length], tf.int32),
        "encoder_padding_mask": tf.ones([batch, length], tf.int32),
        "decoder_token_ids": tf.random.stateless_uniform(
            [batch, length], [seed, 0], 0, 32128, tf.int32
        ),
        "encoder_token_ids": tf.random.stateless_uniform(
            [batch, length], [seed, 1], 0, 32128, tf.int32
        ),
    }

    def fn(*xs: tf.Tensor) -> Any:
        out = model(dict(zip(names, xs, strict=True)), training=False)
        return out["encoder_sequence_output"], out["decoder_sequence_output"]

    return RealModel(
        "T5-small",
        f"keras_hub T5Backbone, T5-small config, encoder + decoder, {length} tokens, batch {batch}",
        fn,
        [tf.TensorSpec([None, None], tf.int32) for _ in names],
        [values[n] for n in names],
        model,
    )


def bilstm(seed: int, keras_init: bool, *, batch: int = 1, length: int = 200) -> RealModel:
    """Keras' bidirectional-LSTM text classifier (the IMDB example): embedding, two
    bidirectional LSTM(64) layers, a sigmoid."""
    import keras
    from keras import layers

    keras.utils.set_random_seed(seed)
    ids = keras.Input((None,), dtype="int32")
    x = layers.Embedding(20000, 128)(ids)
    x = layers.Bidirectional(layers.LSTM(64, return_sequences=True))(x)
    x = layers.Bidirectional(layers.LSTM(64))(x)
    model = keras.Model(ids, layers.Dense(1, activation="sigmoid")(x), name="bilstm")
    if not keras_init:
        trained_like(model, seed)
    tokens = tf.random.stateless_uniform([batch, length], [seed, 0], 0, 20000, tf.int32)
    return RealModel(
        "BiLSTM",
        f"Keras Embedding + 2 x Bidirectional(LSTM(64)) classifier, {length} tokens, batch {batch}",
        _call(model, False),
        [tf.TensorSpec([None, None], tf.int32)],
        [tokens],
        model,
    )


BUILDERS: dict[str, Callable[[int, bool], RealModel]] = {
    "resnet50": _image_model("ResNet50", 1, 224),
    "efficientnet_b0": _image_model("EfficientNetB0", 1, 224),
    "mobilenet_v3_small": _image_model("MobileNetV3Small", 1, 224),
    "dlrm": dlrm,
    "t5_small": t5,
    "bilstm": bilstm,
    # more CNNs, held out from the layout work: channel concats (DenseNet, Inception), separable
    # convolutions (Xception), layer norms over channels (ConvNeXt), fused MBConv (EfficientNetV2)
    "densenet121": _image_model("DenseNet121", 1, 224),
    "inception_v3": _image_model("InceptionV3", 1, 299),
    "xception": _image_model("Xception", 1, 299),
    "convnext_tiny": _image_model("ConvNeXtTiny", 1, 224),
    "efficientnet_v2_b0": _image_model("EfficientNetV2B0", 1, 224),
}
