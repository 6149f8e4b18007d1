"""Attention kernels give TensorFlow's answers, as C++ and as CUDA (run through the SIMT
emulation): heads read through transposes, bias adds and scales on the operands, position
biases and masks on the scores, queries and keys of different unknown lengths, rows that cross
the CPU's blocks and batch points, keys longer than a CUDA block, and masked rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close

import tf_stitch

S = tf.TensorSpec
HEADS, DIM = 3, 8
KERNELS = ["cpu", "simt"]


def split(t: tf.Tensor) -> tf.Tensor:
    return tf.transpose(t, [0, 2, 1, 3])


def t5(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
    scores = tf.matmul(split(q), split(k), transpose_b=True) + bias
    return tf.transpose(tf.matmul(tf.nn.softmax(scores), split(v)), [0, 2, 1, 3])


def biased(q: tf.Tensor, kv: tf.Tensor, bq: tf.Tensor, bk: tf.Tensor) -> tf.Tensor:
    """Keras' MultiHeadAttention after its projections: per-head bias adds, a scaled query,
    Einsums in its equations."""
    query = (q + bq) * (1.0 / np.sqrt(DIM))
    scores = tf.einsum("aecd,abcd->acbe", kv + bk, query)
    return tf.einsum("acbe,aecd->abcd", tf.nn.softmax(scores), kv)


def masked(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, keep: tf.Tensor) -> tf.Tensor:
    """Cross attention with a padding mask of -inf (a row with no key kept is NaN, as in TF)."""
    scores = tf.einsum("bhqd,bhkd->bhqk", q, k)
    scores = tf.where(keep[:, None, None, :], scores, -np.inf)
    return tf.einsum("bhqk,bhkd->bhqd", tf.nn.softmax(scores), v)


def zeroed(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, keep: tf.Tensor) -> tf.Tensor:
    """A padding mask applied before the softmax and to its probabilities (a row with no key
    kept is then zeros)."""
    scores = tf.where(keep, tf.matmul(q, k, transpose_b=True), -1e9)
    return tf.matmul(tf.nn.softmax(scores) * tf.cast(keep, tf.float32), v)


def dropout_path(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor) -> tf.Tensor:
    """Keras' TensorFlow backend with dropout: K Q^T, transposed to put the keys last."""
    scores = tf.transpose(tf.matmul(k, q, transpose_b=True), [0, 1, 3, 2])
    return tf.matmul(tf.nn.softmax(scores * 0.25), v)


def select_zeroed(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, keep: tf.Tensor) -> tf.Tensor:
    """Keras 3's masked softmax: -1e9 where masked, then the masked probabilities set to 0
    (a row with no key kept is zeros), the scores read twice on the way."""
    s = tf.matmul(q, k, transpose_b=True) * 0.25
    p = tf.nn.softmax(tf.where(keep, s, s - 1e9))
    return tf.matmul(tf.where(keep, p, 0.0), v)


def refined_bias(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
    """Scores of unknown length plus a bias of known length (T5's position bias)."""
    return tf.matmul(tf.nn.softmax(tf.matmul(q, k, transpose_b=True) + bias), v)


def _qkv(batch: int, length: int, seed: int) -> list[tf.Tensor]:
    rng = np.random.default_rng(seed)
    shape = (batch, length, HEADS, DIM)
    return [tf.constant(rng.standard_normal(shape), tf.float32) for _ in "qkv"]


def _keras(causal: bool = False, dropout: float = 0.0) -> Callable[..., Any]:
    """Keras' MultiHeadAttention, at inference: with a causal mask (built from the scores'
    shape and a band), or with dropout (then its TensorFlow backend transposes K Q^T)."""
    import keras

    keras.utils.set_random_seed(1)
    layer = keras.layers.MultiHeadAttention(HEADS, DIM, dropout=dropout)
    x = np.zeros((1, 70, 24), np.float32)
    layer(x, x, use_causal_mask=causal)
    return lambda t: layer(t, t, use_causal_mask=causal, training=False)


def _case_inputs(name: str) -> tuple[Callable[..., Any], list[S], list[list[tf.Tensor]]]:
    rng = np.random.default_rng(3)
    if name == "zeroed":
        qkv = [tf.constant(rng.standard_normal((2, HEADS, 67, DIM)), tf.float32) for _ in "qkv"]
        keep = np.ones((2, 1, 1, 67), bool)
        keep[0, ..., :65] = False
        keep[1] = False
        specs = [S([None, HEADS, None, DIM])] * 3 + [S([None, 1, 1, None], tf.bool)]
        return zeroed, specs, [[*qkv, tf.constant(keep)]]
    heads = [S([None, HEADS, None, DIM])] * 3
    if name == "dropout_path":
        qkv = [tf.constant(rng.standard_normal((2, HEADS, 67, DIM)), tf.float32) for _ in "qkv"]
        return dropout_path, heads, [qkv]
    if name == "select_zeroed":
        qkv = [tf.constant(rng.standard_normal((2, HEADS, 67, DIM)), tf.float32) for _ in "qkv"]
        keep = np.ones((2, 1, 1, 67), bool)
        keep[0, ..., :65] = False
        keep[1] = False
        return select_zeroed, [*heads, S([None, 1, 1, None], tf.bool)], [[*qkv, tf.constant(keep)]]
    if name == "refined_bias":
        qkv = [tf.constant(rng.standard_normal((2, HEADS, 16, DIM)), tf.float32) for _ in "qkv"]
        bias = tf.constant(rng.standard_normal((1, HEADS, 16, 16)), tf.float32)
        return refined_bias, [*heads, S([1, HEADS, 16, 16])], [[*qkv, bias]]
    if name == "keras_dropout":
        x = tf.constant(rng.standard_normal((2, 70, 24)), tf.float32)
        return _keras(dropout=0.1), [S([None, 70, 24])], [[x]]
    if name == "keras_causal":
        x = tf.constant(rng.standard_normal((2, 70, 24)), tf.float32)
        return _keras(causal=True), [S([None, 70, 24])], [[x]]
    if name == "t5":
        specs = [S([None, None, HEADS, DIM])] * 3 + [S([1, HEADS, None, None])]
        runs = []
        for batch, length in ((2, 70), (1, 33)):  # 70 > 64 keys: two tiles of emulated threads
            bias = tf.constant(rng.standard_normal((1, HEADS, length, length)), tf.float32)
            runs.append([*_qkv(batch, length, batch), bias])
        return t5, specs, runs
    if name == "biased":
        specs = [S([None, 40, HEADS, DIM]), S([None, 40, HEADS, DIM]), S([HEADS, DIM]), S([DIM])]
        q, kv, _ = _qkv(3, 40, 5)
        bq = tf.constant(rng.standard_normal((HEADS, DIM)), tf.float32)
        bk = tf.constant(rng.standard_normal((DIM,)), tf.float32)
        return biased, specs, [[q, kv, bq, bk]]
    specs = [S([None, HEADS, None, DIM])] * 3 + [S([None, None], tf.bool)]
    q = tf.constant(rng.standard_normal((2, HEADS, 5, DIM)), tf.float32)
    k, v = (tf.constant(rng.standard_normal((2, HEADS, 67, DIM)), tf.float32) for _ in "kv")
    keep = np.ones((2, 67), bool)
    keep[0, :65] = False  # batch point 0: only its last keys, in the second tile
    keep[1, :] = False  # batch point 1: no key at all
    return masked, specs, [[q, k, v, tf.constant(keep)]]


CASES = ["t5", "biased", "masked", "zeroed", "keras_causal"]
CASES += ["dropout_path", "select_zeroed", "refined_bias", "keras_dropout"]


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("name", CASES)
def test_attention_kernel_matches_tensorflow(
    name: str, kernels: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TF_STITCH_KERNELS", kernels)
    fn, specs, runs = _case_inputs(name)
    original = tf.function(fn, input_signature=specs)
    optimized = tf_stitch.optimize(original)
    attention = [k for k in optimized.kernels if k.schedule.startswith("attention")]
    assert len(attention) == 1, tf_stitch.explain(optimized)
    if not name.startswith("keras"):  # (its projections stay library calls, and kernels)
        left = {n.op for n in optimized.graph_def.node} - {"Placeholder", "Identity", "Const"}
        assert left <= {"StitchedKernel", "Reshape", "StridedSlice"}, left  # (mask views)
    for xs in runs:
        expected = original(*xs)
        assert_close(expected, optimized(*xs), rtol=2e-5, atol=2e-5)
        if name == "masked":  # the row with no key kept is NaN in both
            assert np.isnan(expected.numpy()[1]).all()


def test_a_block_of_query_rows_can_cross_batch_points() -> None:
    """33 queries: the CPU's blocks of 32 rows start in one batch point and end in the next;
    shards of several blocks each (a large batch) go through them all."""
    fn, specs, _ = _case_inputs("t5")
    original = tf.function(fn, input_signature=specs)
    optimized = tf_stitch.optimize(original)
    rng = np.random.default_rng(9)
    bias = tf.constant(rng.standard_normal((1, HEADS, 33, 33)), tf.float32)
    xs = [*_qkv(9, 33, 4), bias]
    assert_close(original(*xs), optimized(*xs), rtol=2e-5, atol=2e-5)
