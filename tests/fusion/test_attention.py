"""find_attention: which attentions become one kernel, what the kernel reads, and why others do
not."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
from graph_helpers import prepared

from tf_stitch.fusion.attention import find_attention
from tf_stitch.fusion.decision import Decision, Record
from tf_stitch.fusion.legality import Context
from tf_stitch.fusion.planner import plan_groups
from tf_stitch.graph.ir import Graph

S = tf.TensorSpec
HEADS, DIM = 4, 16


def split(t: tf.Tensor) -> tf.Tensor:
    return tf.transpose(t, [0, 2, 1, 3])


def t5_attention(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
    """T5: heads split by transposes, a position bias, no scale, heads merged."""
    scores = tf.matmul(split(q), split(k), transpose_b=True) + bias
    return tf.transpose(tf.matmul(tf.nn.softmax(scores), split(v)), [0, 2, 1, 3])


T5_SPECS = [S([None, None, HEADS, DIM])] * 3 + [S([1, HEADS, None, None])]


def matches(graph: Graph) -> tuple[list[Any], list[Record]]:
    records: list[Record] = []

    def log(subject: str, decision: Decision) -> Decision:
        records.append(Record(subject, decision))
        return decision

    return find_attention(Context(graph), log), records


def test_t5_attention_reads_its_heads_through_the_transposes() -> None:
    graph = prepared(t5_attention, *T5_SPECS)
    (match,), _ = matches(graph)
    ops = sorted(graph.node(n).op for n in match.members)
    assert ops.count("Transpose") == 4  # q, k and v split, the context merged
    assert ops.count("BatchMatMulV2") == 2
    assert {"Max", "Sub", "Exp", "Sum", "RealDiv", "AddV2"} <= set(ops)
    assert {str(ref) for ref, _ in match.leaves} == {"q:0", "k:0", "v:0", "bias:0"}
    # the domain: batch, heads, queries, keys, head dim, value dim
    assert match.domain == (None, HEADS, None, None, DIM, DIM)
    assert match.q.roles == ("b0", "i", "b1", "d") and match.k.roles == ("b0", "j", "b1", "d")
    assert match.out_roles == ("b0", "i", "b1", "e")  # written through the merge's permutation
    assert graph.node(match.output.node).op == "Transpose"


def test_keras_multi_head_attention_takes_its_bias_adds_and_einsums() -> None:
    import keras

    keras.utils.set_random_seed(0)
    layer = keras.layers.MultiHeadAttention(HEADS, DIM)
    x = np.zeros((1, 10, 32), np.float32)
    layer(x, x)
    graph = prepared(lambda t: layer(t, t), S([None, 10, 32]))
    plan = plan_groups(graph)
    (group,) = [g for g in plan.groups if g.attention is not None]
    ops = [n.op for n in group.nodes]
    assert ops.count("Einsum") == 2
    assert ops.count("AddV2") == 3  # the bias adds of Q, K and V
    assert group.schedule.kind == "attention"
    assert group.layout.domain[-4:] == (10, 10, DIM, DIM)
    # the projections (batched matmuls with 32x4x16 weights) stay library calls; the biases
    # are live variables (Placeholders)
    assert all(graph.node(r.node).op in ("Reshape", "Const", "Placeholder") for r in group.inputs)


def test_cross_attention_has_queries_and_keys_of_their_own_lengths() -> None:
    def fn(q: tf.Tensor, kv: tf.Tensor) -> tf.Tensor:
        scores = tf.einsum("bqhd,bkhd->bhqk", q, kv) * 0.25
        return tf.einsum("bhqk,bkhd->bqhd", tf.nn.softmax(scores), kv)

    graph = prepared(fn, S([None, None, HEADS, DIM]), S([None, None, HEADS, DIM]))
    (match,), _ = matches(graph)
    assert match.domain == (None, HEADS, None, None, DIM, DIM)
    # the same tensor is K and V: read with two placements
    assert sorted(roles for _, roles in match.leaves if roles) == [
        ("b0", "i", "b1", "d"),
        ("b0", "j", "b1", "d"),
        ("b0", "j", "b1", "e"),
    ]


def test_does_not_stitch_attention_whose_probabilities_are_fetched() -> None:
    def fn(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor) -> Any:
        p = tf.nn.softmax(tf.matmul(q, k, transpose_b=True))
        return tf.matmul(p, v), p

    graph = prepared(fn, *[S([2, HEADS, 8, DIM])] * 3)
    found, records = matches(graph)
    assert not found
    assert any("not read by one matmul alone" in str(r) for r in records), records


def test_does_not_stitch_a_softmax_over_the_queries() -> None:
    def fn(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor) -> tf.Tensor:
        p = tf.nn.softmax(tf.matmul(q, k, transpose_b=True), axis=-2)
        return tf.matmul(p, v)

    graph = prepared(fn, *[S([2, HEADS, 8, DIM])] * 3)
    found, _ = matches(graph)
    assert not found


def test_does_not_stitch_heads_of_unknown_size() -> None:
    graph = prepared(t5_attention, *[S([2, 8, HEADS, None])] * 3, S([1, HEADS, 8, 8]))
    found, records = matches(graph)
    assert not found
    assert any("head dims are of unknown size" in str(r) for r in records), records


def test_does_not_stitch_scores_read_elsewhere() -> None:
    def fn(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor) -> Any:
        s = tf.matmul(q, k, transpose_b=True)
        return tf.matmul(tf.nn.softmax(s), v), tf.reduce_max(s)

    graph = prepared(fn, *[S([2, HEADS, 8, DIM])] * 3)
    found, records = matches(graph)
    assert not found
    assert any("not only through elementwise ops" in str(r) for r in records), records


def test_keras_causal_mask_is_computed_in_the_kernel() -> None:
    """Keras builds the mask from ones_like(scores) and a band and selects -1e9 where it is
    false: all of it joins the kernel."""
    import keras

    keras.utils.set_random_seed(0)
    layer = keras.layers.MultiHeadAttention(HEADS, DIM)
    x = np.zeros((1, 10, 32), np.float32)
    layer(x, x, use_causal_mask=True)
    graph = prepared(lambda t: layer(t, t, use_causal_mask=True), S([None, 10, 32]))
    (match,), _ = matches(graph)
    ops = [graph.node(n).op for n in match.members]
    assert {"OnesLike", "LogicalAnd", "SelectV2"} <= set(ops), ops


def test_probabilities_zeroed_by_the_mask_weight_the_values() -> None:
    def fn(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, keep: tf.Tensor) -> tf.Tensor:
        s = tf.where(keep, tf.matmul(q, k, transpose_b=True), -1e9)
        return tf.matmul(tf.nn.softmax(s) * tf.cast(keep, tf.float32), v)

    specs = [*[S([2, HEADS, 8, DIM])] * 3, S([2, 1, 1, 8], tf.bool)]
    graph = prepared(fn, *specs)
    (match,), _ = matches(graph)
    (mul,) = match.weight_nodes
    assert graph.node(mul).op == "Mul"
    factor = next(r for r in graph.node(mul).inputs if r != match.probs)
    assert graph.node(factor.node).op == "Cast" and factor.node in match.members  # in the kernel


def test_does_not_stitch_probabilities_weighted_by_the_scores() -> None:
    """A factor of the probabilities must not read the scores or the probabilities: a kernel
    applies it to each exponential before the sum divides it."""

    def fn(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor) -> tf.Tensor:
        s = tf.matmul(q, k, transpose_b=True)
        p = tf.nn.softmax(s)
        return tf.matmul(p * tf.cast(p > 0.1, tf.float32), v)

    graph = prepared(fn, *[S([2, HEADS, 8, DIM])] * 3)
    found, records = matches(graph)
    assert not found and records
