"""word2vec skip-gram scores with negative sampling."""

from __future__ import annotations

import tensorflow as tf

from tf_stitch.workloads.base import Workload, ids, make_workload, normal

NAME = "w2v"
DESCRIPTION = "word2vec skip-gram: embedding lookups, dot products, log-sigmoid NEG scores"
BATCH = 4096


def build(batch: int = BATCH, small: bool = False, seed: int = 0) -> Workload:
    vocab, dim, negatives = (500, 16, 4) if small else (50_000, 128, 16)
    center_table = tf.Variable(normal([vocab, dim], seed, 0.5 / dim**0.5), name="center_emb")
    context_table = tf.Variable(normal([vocab, dim], seed + 1, 0.5 / dim**0.5), name="ctx_emb")

    def fn(center: tf.Tensor, context: tf.Tensor, negative: tf.Tensor) -> tuple[tf.Tensor, ...]:
        c = tf.gather(center_table, center)  # [B, D]
        pos = tf.gather(context_table, context)  # [B, D]
        neg = tf.gather(context_table, negative)  # [B, K, D]
        pos_logit = tf.reduce_sum(c * pos, axis=-1)  # [B]
        neg_logit = tf.reduce_sum(tf.expand_dims(c, 1) * neg, axis=-1)  # [B, K]
        pos_score = tf.math.log_sigmoid(pos_logit)
        neg_score = tf.math.log_sigmoid(-neg_logit)
        objective = pos_score + tf.reduce_sum(neg_score, axis=-1)
        return objective, pos_score, neg_score

    def make_inputs(b: int) -> list[tf.Tensor]:
        return [
            ids([b], vocab, seed + 100),
            ids([b], vocab, seed + 101),
            ids([b, negatives], vocab, seed + 102),
        ]

    spec = [
        tf.TensorSpec([None], tf.int32, name="center"),
        tf.TensorSpec([None], tf.int32, name="context"),
        tf.TensorSpec([None, negatives], tf.int32, name="negative"),
    ]
    model = {"center": center_table, "context": context_table}
    return make_workload(NAME, fn, spec, make_inputs, batch, model)
