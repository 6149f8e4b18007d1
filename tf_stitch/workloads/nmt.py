"""NMT-style attention encoder-decoder (GNMT-like, Luong attention), teacher forced."""

from __future__ import annotations

import tensorflow as tf

from tf_stitch.workloads.base import Workload, ids, keras_fn, make_workload, seed_keras

NAME = "nmt"
DESCRIPTION = "GRU encoder + GRU decoder (8 unrolled teacher-forced steps) + Luong attention"
BATCH = 32
SRC_LEN = 20
TGT_LEN = 8  # 6 and 3 with small=True


def build(batch: int = BATCH, small: bool = False, seed: int = 0) -> Workload:
    import keras

    vocab, dim, units = (50, 8, 16) if small else (8000, 256, 256)
    src_len, tgt_len = (6, 3) if small else (SRC_LEN, TGT_LEN)
    seed_keras(seed)
    src = keras.Input((src_len,), dtype="int32", name="source")
    tgt = keras.Input((tgt_len,), dtype="int32", name="target")
    src_emb = keras.layers.Embedding(vocab, dim, name="src_embedding")(src)
    tgt_emb = keras.layers.Embedding(vocab, dim, name="tgt_embedding")(tgt)

    enc_gru = keras.layers.GRU(
        units, unroll=True, return_sequences=True, return_state=True, name="encoder"
    )
    memory, enc_state = enc_gru(src_emb)
    dec_gru = keras.layers.GRU(units, unroll=True, return_sequences=True, name="decoder")
    dec = dec_gru(tgt_emb, initial_state=[enc_state])

    # Luong "general" attention: score(h_t, m_s) = h_t . (W m_s); softmax over source steps.
    keys = keras.layers.Dense(units, use_bias=False, name="attention_w")(memory)
    context = keras.layers.Attention(score_mode="dot", name="attention")([dec, memory, keys])
    attended = keras.layers.Concatenate(name="concat")([context, dec])
    attended = keras.layers.Dense(units, activation="tanh", use_bias=False, name="attn_out")(
        attended
    )
    probs = keras.layers.Dense(vocab, activation="softmax", name="projection")(attended)
    model = keras.Model([src, tgt], probs, name="nmt")

    def make_inputs(b: int) -> list[tf.Tensor]:
        return [ids([b, src_len], vocab, seed + 100), ids([b, tgt_len], vocab, seed + 101)]

    spec = [
        tf.TensorSpec([None, src_len], tf.int32, name="source"),
        tf.TensorSpec([None, tgt_len], tf.int32, name="target"),
    ]
    return make_workload(NAME, keras_fn(model), spec, make_inputs, batch, model)
