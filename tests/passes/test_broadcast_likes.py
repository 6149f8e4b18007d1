"""broadcast-likes: BroadcastTo(x, Shape(t)) becomes x * OnesLike(t) where that is the same."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from conftest import assert_close
from graph_helpers import assert_same_values, ops, run_pass, v1_graph

import tf_stitch
from tf_stitch.passes.broadcast_likes import broadcast_likes


def build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 4, 6], name="x")
    mean = tf.reduce_mean(x, axis=-1, keepdims=True, name="mean")
    tf.broadcast_to(mean, tf.shape(x), name="spread")  # [?, 4, 1] -> [?, 4, 6]
    row = tf.compat.v1.placeholder(tf.float32, [6], name="row")
    tf.broadcast_to(row, tf.shape(x), name="rows")  # a lower rank: [6] -> [?, 4, 6]


def test_broadcasts_to_a_tensors_shape_become_products_with_its_ones() -> None:
    g = v1_graph(build, inputs=["x", "row"], outputs=["spread", "rows"])
    out = run_pass(broadcast_likes, g)
    assert ops(out)["BroadcastTo"] == 0 and ops(out)["OnesLike"] == 2
    assert out.node("spread").op == "Mul" and out.node("rows").op == "Mul"
    assert out.info(out.node("spread").output(0)).shape == (None, 4, 6)
    assert_same_values(g, out)


def test_broadcasts_that_a_product_could_change_stay() -> None:
    def build_other() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, None], name="x")
        y = tf.compat.v1.placeholder(tf.float32, [None, 5], name="y")
        n = tf.compat.v1.placeholder(tf.int32, [None, 5], name="n")
        tf.broadcast_to(y, tf.shape(x), name="onto_ones")  # x's may be 1: TensorFlow fails
        tf.broadcast_to(x, tf.shape(y) * 1, name="not_a_shape")  # not Shape(t) itself
        tf.broadcast_to(tf.cast(x, tf.int32), tf.shape(n), name="integers")  # not float32

    outputs = ["onto_ones", "not_a_shape", "integers"]
    g = v1_graph(build_other, inputs=["x", "y", "n"], outputs=outputs)
    out = run_pass(broadcast_likes, g)
    for name in outputs:
        assert out.node(name).op == "BroadcastTo", name


def test_a_mean_gradient_joins_the_layer_norm_backward_kernel() -> None:
    """The gradient of a mean over a batch of unknown size no longer leaves a BroadcastTo."""

    def grad(x: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            tape.watch(x)
            mean = tf.reduce_mean(x, axis=-1, keepdims=True)
            y = tf.reduce_sum(tf.square(x - mean) * tf.exp(x))
        return tape.gradient(y, x)

    f = tf.function(grad, input_signature=[tf.TensorSpec([None, 8, 16])])
    opt = tf_stitch.optimize(f)
    assert "BroadcastTo" not in {n.op for n in opt.graph_def.node}
    x = tf.constant(np.random.default_rng(3).normal(size=(5, 8, 16)), tf.float32)
    assert_close(f(x), opt(x))


def test_tiles_of_ones_by_a_tensors_shape_become_products_with_its_ones() -> None:
    def build_tiles() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 6], name="x")
        g = tf.compat.v1.placeholder(tf.float32, [], name="g")
        tf.tile(tf.reshape(g, [1, 1]), tf.shape(x), name="spread")  # a mean's gradient
        tf.tile(x[:1], tf.shape(x), name="rows")  # not ones: [1, 6] tiled is [?, 36]

    g = v1_graph(build_tiles, inputs=["x", "g"], outputs=["spread", "rows"])
    out = run_pass(broadcast_likes, g)
    assert out.node("spread").op == "Mul" and out.node("rows").op == "Tile"
    assert out.info(out.node("spread").output(0)).shape == (None, 6)
    assert_same_values(g, out)


def test_a_keras_mean_loss_gradient_is_stitched() -> None:
    """sum_over_batch_size: the loss's gradient tiles 1/batch over the batch."""
    import keras

    loss = keras.losses.MeanSquaredError()

    def grad(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            tape.watch(x)
            value = loss(y, tf.tanh(x))
        return value, tape.gradient(value, x)

    f = tf.function(grad, input_signature=[tf.TensorSpec([None, 8])] * 2)
    opt = tf_stitch.optimize(f)
    left = {n.op for n in opt.graph_def.node}
    assert not left & {"Tile", "DivNoNan", "BroadcastTo"}, left
    rng = np.random.default_rng(4)
    for batch in (1, 5):
        x, y = (tf.constant(rng.normal(size=(batch, 8)), tf.float32) for _ in range(2))
        for want, got in zip(f(x, y), opt(x, y), strict=True):
            assert_close(want, got)
