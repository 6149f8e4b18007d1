"""A BERT-style transformer encoder layer in Keras (post-layer-norm, exact GELU)."""

from __future__ import annotations

from typing import Any


def encoder_layer(
    seq_len: int = 128,
    hidden: int = 768,
    heads: int = 12,
    ffn: int = 3072,
    seed: int = 0,
) -> Any:
    """Multi-head self-attention, residual + LayerNorm, Dense-GELU-Dense, residual + LayerNorm,
    with random weights; input `[batch, seq_len, hidden]`, batch unknown."""
    import keras

    keras.utils.set_random_seed(seed)
    x = keras.Input((seq_len, hidden), name="tokens")
    attn = keras.layers.MultiHeadAttention(heads, hidden // heads, name="attention")(x, x)
    h = keras.layers.LayerNormalization(epsilon=1e-12, name="attention_norm")(x + attn)
    f = keras.layers.Dense(ffn, activation="gelu", name="ffn_in")(h)
    f = keras.layers.Dense(hidden, name="ffn_out")(f)
    y = keras.layers.LayerNormalization(epsilon=1e-12, name="output_norm")(h + f)
    return keras.Model(x, y, name="encoder_layer")
