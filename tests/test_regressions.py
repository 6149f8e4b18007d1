"""Graphs a review found mishandled, kept so that they stay handled."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close

import tf_stitch

S = tf.TensorSpec


def _run(graph_def: tf.compat.v1.GraphDef, feeds: dict[str, object], fetches: list[str]) -> list:
    with tf.Graph().as_default() as g:
        tf.graph_util.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=g) as sess:
            return sess.run(fetches, feeds)


def test_fed_constants_are_not_baked_into_kernels() -> None:
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [4, 8], name="x")
        c = tf.constant(2.0, name="c")
        ax = tf.constant(1, name="ax")
        tf.identity(tf.exp(x * c) + 1.0, name="y")
        tf.identity(x - tf.reduce_sum(tf.exp(x), ax, keepdims=True), name="z")
    gd = g.as_graph_def()
    opt = tf_stitch.optimize(gd, inputs=["x:0", "c:0", "ax:0"], outputs=["y:0", "z:0"])
    feeds = {
        "x:0": np.random.default_rng(0).standard_normal([4, 8]).astype(np.float32),
        "c:0": 5.0,
        "ax:0": 0,
    }
    for want, got in zip(
        _run(gd, feeds, ["y:0", "z:0"]), _run(opt, feeds, ["y:0", "z:0"]), strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_unknown_size_against_a_size_one_axis_is_not_fused_into_a_broken_kernel() -> None:
    def f(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        return (x - tf.reduce_sum(x, 1, keepdims=True)) * tf.broadcast_to(y, [1, 8])

    cf = tf.function(f).get_concrete_function(S([1, 8]), S([None, 8]))
    opt = tf_stitch.optimize(cf)
    x, y = tf.random.normal([1, 8]), tf.random.normal([1, 8])
    assert_close(cf(x, y), opt(x, y))


def test_duplicate_reduction_axes_stay_an_error() -> None:
    cf = tf.function(lambda x: tf.reduce_sum(tf.exp(x), [1, -1]) * 2.0).get_concrete_function(
        S([4, 8])
    )
    opt = tf_stitch.optimize(cf)
    x = tf.random.normal([4, 8])
    for fn in (cf, opt):
        with pytest.raises(tf.errors.InvalidArgumentError, match="duplicate"):
            fn(x)


def test_large_row_buffers_live_on_the_heap() -> None:
    def f(x: tf.Tensor) -> tf.Tensor:
        e = tf.tanh(tf.exp(x) * 0.1)
        return e * tf.reduce_sum(e, -1, keepdims=True)

    cf = tf.function(f).get_concrete_function(S([2, 1_000_000]))
    opt = tf_stitch.optimize(cf, on_chip_budget=8 << 20)
    assert "buffer" in tf_stitch.explain(opt)
    x = tf.random.normal([2, 1_000_000]) * 0.1
    assert_close(cf(x), opt(x), rtol=1e-4)


@pytest.mark.parametrize("budget", [-1, 1 << 40])
def test_on_chip_budget_is_checked(budget: int) -> None:
    cf = tf.function(lambda x: tf.nn.softmax(x)).get_concrete_function(S([2, 8]))
    with pytest.raises(ValueError, match="on_chip_budget"):
        tf_stitch.optimize(cf, on_chip_budget=budget)


def test_graphs_pinned_to_a_gpu_are_left_where_they_are() -> None:
    @tf.function(input_signature=[S([4, 8])])
    def f(x: tf.Tensor) -> tf.Tensor:
        with tf.device("/GPU:0"):
            return tf.nn.softmax(x) * tf.reduce_sum(tf.constant([1.0, 2.0]) * 3.0)

    opt = tf_stitch.optimize(f)
    assert "stitched kernels run on the CPU only" in tf_stitch.explain(f)
    x = tf.random.normal([4, 8])
    assert_close(f(x), opt(x))


@pytest.mark.parametrize("index", [(slice(None), 1), (slice(None), slice(None), 2)])
def test_a_window_that_drops_an_axis_is_read_with_its_source_strides(index: tuple) -> None:
    # x[:, 1] of [8,4,16] is an [8,16] window whose rows are 64 elements apart; a kernel that
    # read it as one contiguous run of 128 elements gave wrong values
    cf = tf.function(lambda x: tf.exp(x[index]) * 2.0 + 1.0).get_concrete_function(S([8, 4, 16]))
    opt = tf_stitch.optimize(cf)
    assert len(opt.kernels) == 1
    x = tf.random.normal([8, 4, 16])
    assert_close(cf(x), opt(x))


def test_stacked_lstms_train_with_grapplers_shape_inference() -> None:
    """The gradient of a stacked LSTM's input transposes is one kernel, its input [12, s0, s1]
    with s1 known to Grappler (16) and s0 the batch. The op's shape function once merged both
    symbols through one shared unknown dim; Grappler's shape refiner takes every merge as an
    equality, so it took the batch for 16 and folded the second layer's initial state to
    [16, 16]: at batch 8 the training step failed. Losses and weights stay TensorFlow's."""
    import keras

    def build() -> tuple[keras.Model, keras.optimizers.Optimizer]:
        keras.utils.set_random_seed(0)
        inp = keras.Input((12, 10))
        h = keras.layers.LSTM(16)(keras.layers.LSTM(16, return_sequences=True)(inp))
        model = keras.Model(inp, keras.layers.Dense(3)(h))
        return model, keras.optimizers.SGD(0.05)

    x = tf.random.stateless_normal([8, 12, 10], [1, 2])
    y = tf.random.stateless_uniform([8], [3, 4], 0, 3, tf.int32)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    spec = [S([None, 12, 10]), S([None], tf.int32)]

    def step_of(model: keras.Model, opt: keras.optimizers.Optimizer) -> object:
        def step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        return step

    runs = []
    for wrap in (tf.function, tf_stitch.function):
        model, opt = build()
        fn = wrap(step_of(model, opt), input_signature=spec)
        runs.append(([float(fn(x, y)) for _ in range(2)], [w.numpy() for w in model.weights]))
    (losses, weights), (stitched_losses, stitched_weights) = runs
    np.testing.assert_allclose(stitched_losses, losses, rtol=1e-5)
    for a, b in zip(weights, stitched_weights, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
