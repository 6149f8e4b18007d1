"""Transformer encoders and decoders shaped like BERT, DistilBERT, RoBERTa, ALBERT, GPT-2 and
ViT, built from their configurations with Keras layers (random weights, no presets)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from tf_stitch.zoo.entry import ZooEntry, keras_entry

SEQ = 128  # tokens per text example


@dataclass(frozen=True)
class Config:
    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int = 30522
    causal: bool = False  # GPT-2: masked self-attention
    pre_norm: bool = False  # GPT-2 and ViT normalize before each sublayer
    embedding: int = 0  # ALBERT: factorized embedding size (0: the hidden size)
    shared: bool = False  # ALBERT: one block's weights for every layer


def _block(cfg: Config, index: int) -> Any:
    """One encoder (or, causal, decoder-only) block as a callable on [B, T, H]."""
    import keras
    from keras import layers

    attention = layers.MultiHeadAttention(cfg.heads, cfg.hidden // cfg.heads, name=f"attn_{index}")
    norm1 = layers.LayerNormalization(epsilon=1e-6, name=f"norm1_{index}")
    norm2 = layers.LayerNormalization(epsilon=1e-6, name=f"norm2_{index}")
    up = layers.Dense(cfg.ffn, activation=keras.activations.gelu, name=f"ffn_up_{index}")
    down = layers.Dense(cfg.hidden, name=f"ffn_down_{index}")

    def call(x: Any) -> Any:
        if cfg.pre_norm:
            h = norm1(x)
            x = x + attention(h, h, use_causal_mask=cfg.causal)
            return x + down(up(norm2(x)))
        x = norm1(x + attention(x, x, use_causal_mask=cfg.causal))
        return norm2(x + down(up(x)))

    return call


def _encoder(cfg: Config, x: Any) -> Any:
    blocks = (
        [_block(cfg, 0)] * cfg.layers if cfg.shared else [_block(cfg, i) for i in range(cfg.layers)]
    )
    for block in blocks:
        x = block(x)
    return x


def _text_model(name: str, cfg: Config) -> Any:
    import keras
    from keras import layers, ops

    ids = keras.Input((SEQ,), dtype="int32", name="input_ids")
    width = cfg.embedding or cfg.hidden
    x = layers.Embedding(cfg.vocab, width, name="token_embedding")(ids)
    positions = layers.Embedding(SEQ, width, name="position_embedding")(ops.arange(SEQ))
    x = x + positions
    if cfg.embedding:
        x = layers.Dense(cfg.hidden, name="embedding_projection")(x)
    if not cfg.pre_norm:
        x = layers.LayerNormalization(epsilon=1e-6, name="embedding_norm")(x)
    x = _encoder(cfg, x)
    if cfg.pre_norm:  # GPT-2: final norm, logits tied to nothing (a head of vocab size)
        x = layers.LayerNormalization(epsilon=1e-6, name="final_norm")(x)
        out = layers.Dense(cfg.vocab, name="lm_head")(x[:, -1])
    else:  # BERT: the pooler on the first token
        out = layers.Dense(cfg.hidden, activation="tanh", name="pooler")(x[:, 0])
    return keras.Model(ids, out, name=name)


def _vit(name: str, cfg: Config, size: int = 224, patch: int = 16) -> Any:
    import keras
    from keras import layers, ops

    image = keras.Input((size, size, 3), name="image")
    x = layers.Conv2D(cfg.hidden, patch, strides=patch, name="patch_embedding")(image)
    x = layers.Reshape(((size // patch) ** 2, cfg.hidden), name="patches")(x)
    cls = layers.Embedding(1, cfg.hidden, name="class_token")(ops.zeros((1, 1), "int32"))
    x = layers.Concatenate(axis=1, name="tokens")([ops.zeros_like(x[:, :1]) + cls, x])
    x = x + layers.Embedding(x.shape[1], cfg.hidden, name="position_embedding")(
        ops.arange(x.shape[1])
    )
    x = _encoder(cfg, x)
    x = layers.LayerNormalization(epsilon=1e-6, name="final_norm")(x)
    return keras.Model(image, layers.Dense(1000, name="head")(x[:, 0]), name=name)


TEXT = {
    "bert_base": ("BERT-base-shaped encoder", Config(12, 768, 12, 3072)),
    "bert_large": ("BERT-large-shaped encoder", Config(24, 1024, 16, 4096)),
    "distilbert": ("DistilBERT-shaped encoder", Config(6, 768, 12, 3072)),
    "roberta_base": ("RoBERTa-base-shaped encoder", Config(12, 768, 12, 3072, vocab=50265)),
    "albert_base": (
        "ALBERT-base-shaped encoder (128-d factorized embedding, one shared block)",
        Config(12, 768, 12, 3072, vocab=30000, embedding=128, shared=True),
    ),
    "gpt2": (
        "GPT-2-shaped decoder (pre-norm, causal self-attention, LM head on the last token)",
        Config(12, 768, 12, 3072, vocab=50257, causal=True, pre_norm=True),
    ),
}
VISION = {
    "vit_b16": (
        "ViT-B/16-shaped image classifier, 224x224",
        Config(12, 768, 12, 3072, pre_norm=True),
    ),
    "vit_s16": (
        "ViT-S/16-shaped image classifier, 224x224",
        Config(12, 384, 6, 1536, pre_norm=True),
    ),
}


def entries() -> list[ZooEntry]:
    out = [
        keras_entry(
            name,
            "transformer",
            f"{text}: {cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads} heads, FFN "
            f"{cfg.ffn}, {SEQ} tokens",
            [(SEQ,)],
            functools.partial(_text_model, name, cfg),
            dtypes=["int32"],
            vocab=cfg.vocab,
        )
        for name, (text, cfg) in TEXT.items()
    ]
    out += [
        keras_entry(
            name,
            "transformer",
            f"{text}: {cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads} heads",
            [(224, 224, 3)],
            functools.partial(_vit, name, cfg),
        )
        for name, (text, cfg) in VISION.items()
    ]
    return out
