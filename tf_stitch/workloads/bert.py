"""A BERT-base-shaped encoder stack: two encoder layers (hidden 768, 12 heads, FFN 3072)."""

from __future__ import annotations

import tensorflow as tf

from tf_stitch.models.encoder import encoder_layer
from tf_stitch.workloads.base import Workload, make_workload, normal

NAME = "bert"
DESCRIPTION = "2 BERT-base encoder layers (768 hidden, 12 heads, FFN 3072, exact GELU), seq 128"
BATCH = 1
LAYERS = 2


def build(batch: int = BATCH, small: bool = False, seed: int = 0) -> Workload:
    seq, hidden, heads, ffn = (16, 64, 4, 128) if small else (128, 768, 12, 3072)
    layers = [encoder_layer(seq, hidden, heads, ffn, seed=seed + i) for i in range(LAYERS)]

    def fn(tokens: tf.Tensor) -> tf.Tensor:
        h = tokens
        for layer in layers:
            h = layer(h, training=False)
        return h

    def make_inputs(b: int) -> list[tf.Tensor]:
        return [normal([b, seq, hidden], seed + 100)]

    spec = [tf.TensorSpec([None, seq, hidden], tf.float32, name="tokens")]
    return make_workload(NAME, fn, spec, make_inputs, batch, layers)
