"""A Transformer decoder layer: causal self-attention, cross-attention, FFN, post layer norms."""

from __future__ import annotations

import tensorflow as tf

from tf_stitch.workloads.base import Workload, keras_fn, make_workload, normal, seed_keras

NAME = "transformer_decoder"
DESCRIPTION = "Transformer decoder layer (d 512, 8 heads, FFN 2048): causal self-attn, cross-attn"
BATCH = 4


def build(batch: int = BATCH, small: bool = False, seed: int = 0) -> Workload:
    import keras

    tgt_len, src_len, d, heads, ffn = (8, 12, 32, 4, 64) if small else (64, 64, 512, 8, 2048)
    seed_keras(seed)
    x = keras.Input((tgt_len, d), name="target")
    memory = keras.Input((src_len, d), name="memory")
    self_attn = keras.layers.MultiHeadAttention(heads, d // heads, name="self_attention")
    h = self_attn(x, x, use_causal_mask=True)
    h = keras.layers.LayerNormalization(epsilon=1e-6, name="self_attention_norm")(x + h)
    cross = keras.layers.MultiHeadAttention(heads, d // heads, name="cross_attention")
    c = cross(h, memory)
    h = keras.layers.LayerNormalization(epsilon=1e-6, name="cross_attention_norm")(h + c)
    f = keras.layers.Dense(ffn, activation="relu", name="ffn_in")(h)
    f = keras.layers.Dense(d, name="ffn_out")(f)
    y = keras.layers.LayerNormalization(epsilon=1e-6, name="ffn_norm")(h + f)
    model = keras.Model([x, memory], y, name="transformer_decoder")

    def make_inputs(b: int) -> list[tf.Tensor]:
        return [normal([b, tgt_len, d], seed + 100), normal([b, src_len, d], seed + 101)]

    spec = [
        tf.TensorSpec([None, tgt_len, d], tf.float32, name="target"),
        tf.TensorSpec([None, src_len, d], tf.float32, name="memory"),
    ]
    return make_workload(NAME, keras_fn(model), spec, make_inputs, batch, model)
