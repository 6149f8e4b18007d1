"""fill-likes: Fill(Shape(t), c) becomes OnesLike/ZerosLike of t, cast and scaled as needed."""

from __future__ import annotations

import tensorflow as tf
from conftest import assert_close
from graph_helpers import assert_same_values, ops, run_pass, v1_graph

import tf_stitch
from tf_stitch.passes.fill_likes import fill_likes


def build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 6], name="x")
    scores = tf.exp(x, name="scores")
    tf.ones_like(scores, name="ones")
    tf.zeros_like(scores, name="zeros")
    tf.fill(tf.shape(scores), 2.5, name="halves")
    mask = tf.ones_like(scores, dtype=tf.bool, name="mask")
    tf.where(mask, scores, -1.0, name="masked")


def test_fills_of_a_shape_become_likes_of_the_tensor() -> None:
    outputs = ["ones", "zeros", "halves", "masked"]
    g = v1_graph(build, inputs=["x"], outputs=outputs)
    assert g.node("halves").op == "Fill" and g.node("mask").op == "Fill"
    out = run_pass(fill_likes, g)
    assert ops(out)["Fill"] == 0 and ops(out)["Shape"] == ops(g)["Shape"]  # prune drops them
    assert out.node("ones").op == "OnesLike" and out.node("zeros").op == "ZerosLike"
    assert out.node("halves").op == "Mul" and out.node("mask").op == "Cast"
    assert_same_values(g, out)


def test_fills_of_other_shapes_or_values_stay() -> None:
    def build_other() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 6], name="x")
        n = tf.compat.v1.placeholder(tf.float32, [], name="n")
        tf.fill(tf.shape(x), n, name="by_value")  # the value is fed
        tf.fill(tf.shape(x)[:1], 1.0, name="of_part")  # not the shape of one tensor
        tf.fill(tf.shape(x), 7, name="integers")  # int32: not a fused dtype

    g = v1_graph(build_other, inputs=["x", "n"], outputs=["by_value", "of_part", "integers"])
    out = run_pass(fill_likes, g)
    for name in ("by_value", "of_part", "integers"):
        assert out.node(name).op == "Fill", name


def test_a_mask_shaped_like_the_scores_joins_their_kernel() -> None:
    def attention(x: tf.Tensor) -> tf.Tensor:
        scores = tf.exp(x) * 0.5
        mask = tf.ones_like(scores, dtype=tf.bool)
        return tf.nn.softmax(tf.where(mask, scores, -1e9))

    f = tf.function(attention, input_signature=[tf.TensorSpec([None, 16])])
    opt = tf_stitch.optimize(f)
    assert [n.op for n in opt.graph_def.node].count("StitchedKernel") == 1
    assert not {"Fill", "Shape"} & {n.op for n in opt.graph_def.node}
    x = tf.random.normal([3, 16])
    assert_close(f(x), opt(x))
