"""DIEN (Deep Interest Evolution Network) inference: interest extractor GRU, MLP attention
with the target item, attention-gated GRU (AUGRU), final MLP."""

from __future__ import annotations

import tensorflow as tf

from tf_stitch.workloads.base import Workload, ids, keras_fn, make_workload, seed_keras

NAME = "dien"
DESCRIPTION = "DIEN: GRU over 20 behaviours, MLP attention + softmax, unrolled AUGRU, MLP"
BATCH = 512
STEPS = 20  # 5 with small=True


def build(batch: int = BATCH, small: bool = False, seed: int = 0) -> Workload:
    import keras
    from keras import layers, ops

    items, cats, dim, units = (100, 10, 8, 8) if small else (100_000, 1000, 32, 64)
    mlp = (16, 8) if small else (200, 80)
    steps = 5 if small else STEPS
    seed_keras(seed)
    t_item = keras.Input((), dtype="int32", name="target_item")
    t_cat = keras.Input((), dtype="int32", name="target_cat")
    h_items = keras.Input((steps,), dtype="int32", name="hist_items")
    h_cats = keras.Input((steps,), dtype="int32", name="hist_cats")
    item_emb = layers.Embedding(items, dim, name="item_embedding")
    cat_emb = layers.Embedding(cats, dim, name="cat_embedding")
    target = layers.Concatenate(name="target")([item_emb(t_item), cat_emb(t_cat)])  # [B, 2D]
    hist = layers.Concatenate(name="hist")([item_emb(h_items), cat_emb(h_cats)])  # [B, T, 2D]

    # Interest extractor.
    interests = layers.GRU(units, unroll=True, return_sequences=True, name="extractor")(hist)

    # Attention between the target and each interest state: MLP scores, softmax over steps.
    query = layers.RepeatVector(steps)(layers.Dense(units, name="query")(target))
    att = layers.Concatenate()([interests, query, interests - query, interests * query])
    att = layers.Dense(80 if not small else 8, activation="sigmoid", name="att_fc1")(att)
    att = layers.Dense(40 if not small else 4, activation="sigmoid", name="att_fc2")(att)
    scores = layers.Dense(1, name="att_score")(att)  # [B, T, 1]
    weights = layers.Softmax(axis=1, name="att_softmax")(scores)

    # Interest evolution: GRU whose update gate is scaled by the attention weight (AUGRU).
    gates = layers.Dense(2 * units, activation="sigmoid", name="augru_gates")
    cand = layers.Dense(units, activation="tanh", name="augru_candidate")
    h = ops.zeros_like(interests[:, 0])
    for t in range(steps):
        x_t = interests[:, t]
        zr = gates(ops.concatenate([x_t, h], axis=-1))
        z, r = zr[:, :units], zr[:, units:]
        h_tilde = cand(ops.concatenate([x_t, r * h], axis=-1))
        u = weights[:, t] * z
        h = (1.0 - u) * h + u * h_tilde

    pooled = ops.sum(hist, axis=1)
    f = layers.Concatenate(name="features")([h, target, pooled, target * pooled])
    for i, n in enumerate(mlp):
        f = layers.Dense(n, name=f"fc{i}")(f)
        f = layers.PReLU(name=f"prelu{i}")(f)
    y = layers.Dense(2, activation="softmax", name="ctr")(f)
    model = keras.Model([t_item, t_cat, h_items, h_cats], y, name="dien")

    def make_inputs(b: int) -> list[tf.Tensor]:
        return [
            ids([b], items, seed + 100),
            ids([b], cats, seed + 101),
            ids([b, steps], items, seed + 102),
            ids([b, steps], cats, seed + 103),
        ]

    spec = [
        tf.TensorSpec([None], tf.int32, name="target_item"),
        tf.TensorSpec([None], tf.int32, name="target_cat"),
        tf.TensorSpec([None, steps], tf.int32, name="hist_items"),
        tf.TensorSpec([None, steps], tf.int32, name="hist_cats"),
    ]
    return make_workload(NAME, keras_fn(model), spec, make_inputs, batch, model)
