"""Variables stay live: an optimized function reads them at every call, so assignments,
`set_weights` and optimizer updates are seen (issue 21), and a function that writes them (a
training step) writes them as TensorFlow would; `freeze=True` is the explicit choice of
constants, refused with a clear error for a function that writes variables."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close
from graph_helpers import mse_step, ops, spec

import tf_stitch
from tf_stitch.graph.freeze import VariableWriteError, check_no_variable_writes, freeze
from tf_stitch.graph.frontends import load


def _model(seed: int = 0) -> keras.Model:
    """Dense layers, a layer norm and a Keras LSTM (its weights pass into a While loop)."""
    keras.utils.set_random_seed(seed)
    inp = keras.Input((6, 5))
    h = keras.layers.LSTM(8, return_sequences=True)(inp)
    h = keras.layers.LayerNormalization()(keras.layers.Dense(8, activation="gelu")(h))
    out = keras.layers.Dense(3)(keras.layers.GlobalAveragePooling1D()(h))
    return keras.Model(inp, out)


def test_set_weights_is_seen_by_the_next_call() -> None:
    model = _model()
    stitched = tf_stitch.function(lambda x: model(x, training=False))
    x = tf.random.stateless_normal([2, 6, 5], [1, 2])
    assert_close([stitched(x).numpy()], [model(x).numpy()])
    assert stitched.get_optimized(x).kernels  # something was stitched
    rng = np.random.default_rng(3)
    model.set_weights([w + rng.normal(0, 0.3, w.shape).astype(w.dtype) for w in model.weights])
    assert_close([stitched(x).numpy()], [model(x).numpy()])
    assert len(stitched.get_optimized(x).variables) == len(model.weights)


def test_frozen_is_an_explicit_choice_and_keeps_the_old_weights() -> None:
    model = _model()
    frozen = tf_stitch.function(lambda x: model(x, training=False), freeze=True)
    x = tf.random.stateless_normal([2, 6, 5], [1, 2])
    before = frozen(x).numpy()
    assert not frozen.get_optimized(x).variables
    model.set_weights([w * 0.5 for w in model.get_weights()])
    np.testing.assert_array_equal(frozen(x).numpy(), before)
    assert np.abs(model(x).numpy() - before).max() > 1e-3


def test_gradients_applied_outside_are_seen_and_the_loss_falls_as_in_tensorflow() -> None:
    def run(stitch: bool) -> list[float]:
        keras.utils.set_random_seed(0)
        w = tf.Variable(tf.random.stateless_normal([4, 1], [0, 1]))
        b = tf.Variable([0.1])
        x = tf.random.stateless_normal([16, 4], [0, 2])
        y = x @ tf.constant([[1.0], [-2.0], [0.5], [3.0]])

        def loss_and_grads(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, list[tf.Tensor]]:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.nn.tanh(x @ w + b) * 4.0 - y))
            return loss, tape.gradient(loss, [w, b])

        step = tf_stitch.function(loss_and_grads) if stitch else tf.function(loss_and_grads)
        losses = []
        for _ in range(5):
            loss, grads = step(x, y)
            for v, g in zip((w, b), grads, strict=True):
                v.assign_sub(0.05 * g)
            losses.append(float(loss))
        return losses

    expected, got = run(False), run(True)
    assert expected[-1] < expected[0] - 0.1  # it learns
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_an_lstms_gradients_taken_inside_and_applied_outside_follow_tensorflow() -> None:
    """The LSTM's While passes its weights' handles through; converted to their values, the
    gradient's VariableShape of that loop's output read a float (TensorFlow refused the
    graph): it is a Shape of the value now (graph/freeze.py `shapes_of_values`)."""

    def run(stitch: bool) -> list[float]:
        model = _model()
        x = tf.random.stateless_normal([4, 6, 5], [2, 3])
        y = tf.random.stateless_normal([4, 3], [2, 4])

        def loss_and_grads(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, list[tf.Tensor]]:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
            return loss, tape.gradient(loss, model.trainable_variables)

        step = tf_stitch.function(loss_and_grads) if stitch else tf.function(loss_and_grads)
        losses = []
        for _ in range(3):
            loss, grads = step(x, y)
            for v, g in zip(model.trainable_variables, grads, strict=True):
                v.assign_sub(0.01 * g)
            losses.append(float(loss))
        return losses

    expected, got = run(False), run(True)
    assert expected[-1] < expected[0]  # it learns
    np.testing.assert_allclose(got, expected, rtol=1e-4)


def test_optimize_keeps_variables_live_and_freeze_true_folds_them() -> None:
    v = tf.Variable([1.0, 2.0, 3.0])
    fn = tf.function(lambda x: tf.nn.relu(x * v + 1.0), input_signature=[spec(None, 3)])
    live, frozen = tf_stitch.optimize(fn), tf_stitch.optimize(fn, freeze=True)
    x = tf.ones([2, 3])
    v.assign([-5.0, 5.0, 5.0])
    assert_close([live(x).numpy()], [np.float32([[0, 6, 6]] * 2)])
    assert_close([frozen(x).numpy()], [np.float32([[2, 3, 4]] * 2)])
    assert list(live.variables) and not frozen.variables


def test_a_live_variable_is_a_placeholder_for_its_value_in_the_graph() -> None:
    v = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
    fe = load(tf.function(lambda x: x @ v), input_signature=[spec(None, 2)])
    assert "ReadVariableOp" not in ops(fe.graph)
    (name,) = fe.variables
    node = fe.graph.node(name)
    assert node.op == "Placeholder" and fe.graph.info(node.output(0)).shape == (2, 3)
    assert fe.variables[name] is v.handle
    frozen = load(tf.function(lambda x: x @ v), input_signature=[spec(None, 2)], freeze=True)
    assert not frozen.variables and frozen.graph.node(name).op == "Const"


def test_variables_read_in_a_loop_and_a_branch_stay_live() -> None:
    w = tf.Variable(tf.fill([3, 3], 0.5))
    c = tf.Variable(2.0)

    def fn(x: tf.Tensor) -> tf.Tensor:
        y = tf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, tf.tanh(h @ w)), (0, x))[1]
        return tf.cond(tf.reduce_sum(x) > 0, lambda: y * c, lambda: y - c)

    stitched = tf_stitch.function(fn, input_signature=[spec(None, 3)])
    plain = tf.function(fn, input_signature=[spec(None, 3)])
    x = tf.random.stateless_normal([4, 3], [5, 6])
    for value in (0.5, -0.25):
        w.assign(tf.fill([3, 3], value))
        c.assign(value * 4)
        for sign in (1.0, -1.0):
            assert_close([stitched(x * sign).numpy()], [plain(x * sign).numpy()])


def test_a_variable_written_then_read_gives_tensorflow_s_results_at_every_call() -> None:
    def make() -> tuple[tf.Variable, object]:
        v = tf.Variable(1.0)

        def step(x: tf.Tensor) -> tf.Tensor:
            before = x * v
            v.assign_add(1.0)
            return tf.nn.relu(before + x * v)  # read before and after the write

        return v, step

    (v1, plain), (v2, stitched) = make(), make()
    plain_fn = tf.function(plain, input_signature=[spec(3)])
    stitched_fn = tf_stitch.function(stitched, input_signature=[spec(3)])
    x = tf.constant([1.0, -2.0, 3.0])
    for _ in range(3):
        assert_close([stitched_fn(x).numpy()], [plain_fn(x).numpy()])
    assert float(v2.numpy()) == float(v1.numpy()) == 4.0


def test_a_keras_training_step_runs_stitched_and_follows_tensorflow() -> None:
    def run(stitch: bool) -> tuple[list[float], list[np.ndarray], int]:
        keras.utils.set_random_seed(0)
        model = keras.Sequential(
            [
                keras.Input((8,)),
                keras.layers.Dense(16, activation="relu"),
                keras.layers.LayerNormalization(),
                keras.layers.Dense(1),
            ]
        )
        opt = keras.optimizers.Adam(1e-2)
        opt.build(model.trainable_variables)
        step = mse_step(model, opt)
        signature = [spec(None, 8), spec(None, 1)]
        wrap = tf_stitch.function if stitch else tf.function
        fn = wrap(step, input_signature=signature)
        x = tf.random.stateless_normal([32, 8], [1, 2])
        y = tf.reduce_sum(x, 1, keepdims=True)
        losses = [float(fn(x, y)) for _ in range(10)]
        if stitch:
            assert fn.get_optimized(x, y).kernels  # the step was stitched
        return losses, [w.numpy() for w in model.weights], int(opt.iterations.numpy())

    (expected, w_tf, it_tf), (got, w_ts, it_ts) = run(False), run(True)
    assert expected[-1] < expected[0] / 2  # it learns
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    for a, b in zip(w_tf, w_ts, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
    assert it_tf == it_ts == 10


def test_a_written_variable_read_in_a_loop_body_is_stitched_there() -> None:
    """A Keras LSTM's kernels: read at every step of the loop, written by the optimizer after
    it. The body's reads get the variable's shape, so the body is optimized like any other."""

    def make() -> tuple[tf.Variable, object]:
        w = tf.Variable(tf.fill([3, 3], 0.25))

        def step(x: tf.Tensor) -> tf.Tensor:
            def body(i: tf.Tensor, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
                return i + 1, tf.tanh(h @ w) * 0.5 + tf.sigmoid(h)

            y = tf.while_loop(lambda i, h: i < 3, body, (0, x))[1]
            w.assign_sub(tf.reduce_sum(y) * 0.01 * tf.ones([3, 3]))
            return y

        return w, step

    (w1, plain), (w2, stitched) = make(), make()
    plain_fn = tf.function(plain, input_signature=[spec(None, 3)])
    stitched_fn = tf_stitch.function(stitched, input_signature=[spec(None, 3)])
    x = tf.random.stateless_normal([4, 3], [7, 8])
    for _ in range(3):
        assert_close([stitched_fn(x).numpy()], [plain_fn(x).numpy()])
    assert_close([w2.numpy()], [w1.numpy()])
    frozen = freeze(plain_fn.get_concrete_function(x), hold=False, live=True)
    bodies = [f for f in frozen.graph_def.library.function if "body" in f.signature.name]
    reads = [n for f in bodies for n in f.node_def if n.op == "ReadVariableOp"]
    assert reads and all(n.attr["_shape"].shape.dim[0].size == 3 for n in reads)
    optimized = stitched_fn.get_optimized(x)
    assert any("while" in k.node for k in optimized.kernels)  # a kernel in the loop's body


def test_frozen_a_function_that_writes_a_variable_is_refused_by_name() -> None:
    v = tf.Variable(1.0)

    def step(x: tf.Tensor) -> tf.Tensor:
        v.assign_add(1.0)
        return x * v

    fn = tf.function(step, input_signature=[spec(3)])
    with pytest.raises(VariableWriteError, match=r"AssignAddVariableOp .*would be lost"):
        tf_stitch.optimize(fn, freeze=True)
    assert float(v.numpy()) == 1.0  # nothing ran


def test_writes_inside_loop_bodies_are_found() -> None:
    v = tf.Variable(0.0)

    def body(i: tf.Tensor) -> tf.Tensor:
        v.assign_add(1.0)
        return i + 1

    cf = tf.function(lambda n: tf.while_loop(lambda i: i < n, body, [0])).get_concrete_function(
        tf.TensorSpec([], tf.int32)
    )
    with pytest.raises(VariableWriteError, match="AssignAddVariableOp"):
        check_no_variable_writes(cf.graph.as_graph_def(), main_graph=False)
    with pytest.raises(VariableWriteError, match="inside a loop"):
        freeze(cf, live=True)
