"""decompose-gradients: a training step's gradient ops become the elementwise ops and the
column reduction they compute, with TensorFlow's values (NaN and all)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close
from graph_helpers import assert_same_values, ops, run_ir, run_pass, v1_graph

from tf_stitch.passes.decompose_gradients import decompose_gradients

SHAPE = [None, 5, 7]


def _two(op: Callable[..., tf.Tensor], first: str, second: str) -> Callable[[], None]:
    def build() -> None:
        a = tf.compat.v1.placeholder(tf.float32, SHAPE, name="a")
        b = tf.compat.v1.placeholder(tf.float32, SHAPE, name="b")
        # outputs of sigmoid/tanh in (0, 1) and (-1, 1); rsqrt/sqrt outputs positive
        inputs = {"x": a * 4.0, "dy": b, "sig": tf.sigmoid(a), "tanh": tf.tanh(a)}
        inputs["pos"] = tf.abs(a) + 0.5
        tf.identity(op(inputs[first], inputs[second]), name="out")

    return build


CASES = {
    "ReluGrad": _two(lambda x, dy: tf.raw_ops.ReluGrad(gradients=dy, features=x), "x", "dy"),
    "Relu6Grad": _two(lambda x, dy: tf.raw_ops.Relu6Grad(gradients=dy, features=x), "x", "dy"),
    "SigmoidGrad": _two(lambda y, dy: tf.raw_ops.SigmoidGrad(y=y, dy=dy), "sig", "dy"),
    "TanhGrad": _two(lambda y, dy: tf.raw_ops.TanhGrad(y=y, dy=dy), "tanh", "dy"),
    "RsqrtGrad": _two(lambda y, dy: tf.raw_ops.RsqrtGrad(y=y, dy=dy), "pos", "dy"),
    "SqrtGrad": _two(lambda y, dy: tf.raw_ops.SqrtGrad(y=y, dy=dy), "pos", "dy"),
}


@pytest.mark.parametrize("op", list(CASES))
def test_each_gradient_op_is_its_math(op: str) -> None:
    g = v1_graph(CASES[op], outputs=["out"])
    assert ops(g)[op] == 1
    out = run_pass(decompose_gradients, g)
    assert ops(out)[op] == 0
    assert_same_values(g, out, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_bias_add_grad_is_a_sum_over_all_but_the_channels(data_format: str) -> None:
    def build() -> None:
        dy = tf.compat.v1.placeholder(tf.float32, [None, 3, 4, 6], name="dy")
        tf.identity(tf.raw_ops.BiasAddGrad(out_backprop=dy, data_format=data_format), name="out")

    g = v1_graph(build, outputs=["out"])
    out = run_pass(decompose_gradients, g)
    assert ops(out)["BiasAddGrad"] == 0 and ops(out)["Sum"] == 1
    assert_same_values(g, out, rtol=1e-5, atol=1e-5)


def test_relu_grad_propagates_nan_as_tensorflow_does() -> None:
    g = v1_graph(CASES["ReluGrad"], outputs=["out"])
    out = run_pass(decompose_gradients, g)
    a = np.array([[[-1.0, 1.0, 0.0, 2.0, -3.0, 1.0, 1.0]] * 5], np.float32)
    b = np.full_like(a, np.nan)
    b[0, 0, 1] = np.inf
    feeds = {"a:0": a, "b:0": b}
    assert_close(run_ir(g, feeds), run_ir(out, feeds))  # NaN * 0 = NaN, not 0


def test_a_training_step_s_gradients_are_stitched() -> None:
    import keras

    import tf_stitch

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((6,)), keras.layers.Dense(8, activation="sigmoid"), keras.layers.Dense(1)]
    )
    opt = keras.optimizers.SGD(0.1)
    opt.build(model.trainable_variables)

    def step(x: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x)))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    stitched = tf_stitch.function(step, input_signature=[tf.TensorSpec([None, 6])])
    x = tf.random.stateless_normal([16, 6], [1, 2])
    stitched(x)
    left = ops(stitched.get_optimized(x).graph)
    assert left["SigmoidGrad"] == 0 and left["BiasAddGrad"] == 0


def test_gradients_whose_shapes_match_only_after_constant_reshapes_are_decomposed() -> None:
    """dy reshaped by a target computed from shapes (as tensordot's gradient does: DIEN's
    attention) has sizes TensorFlow does not know until static-reshape makes the target a
    constant, so the pipeline decomposes gradients again after it."""
    import tf_stitch

    def fn(x: tf.Tensor) -> tf.Tensor:
        t = x * 3.0
        target = tf.concat([tf.gather(tf.shape(t), [0]), tf.gather(tf.shape(t), [1])], 0)
        dy = tf.reshape(t, target)  # [None, None] to TensorFlow
        return tf.raw_ops.SigmoidGrad(y=tf.sigmoid(x), dy=dy) * 2.0

    f = tf.function(fn, input_signature=[tf.TensorSpec([None, 8])])
    optimized = tf_stitch.optimize(f)
    assert "SigmoidGrad" not in {n.op for n in optimized.graph_def.node}
    x = tf.random.normal([3, 8], seed=4)
    assert_close(f(x), optimized(x))
