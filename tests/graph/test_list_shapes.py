"""TensorList element shapes: the backward loop of a Keras LSTM's training step pops what its
forward loop pushed; with the element shapes known there, its body is stitched too."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from graph_helpers import mse_step

import tf_stitch
from tf_stitch.graph.frontends import load
from tf_stitch.graph.functions import function_graph
from tf_stitch.graph.list_shapes import list_element_shapes
from tf_stitch.graph.loop_constants import WHILE_OPS


def _step(seed: int) -> tuple[object, list[tf.Variable]]:
    keras.utils.set_random_seed(seed)
    inp = keras.Input((6, 4))
    model = keras.Model(inp, keras.layers.Dense(1)(keras.layers.LSTM(8)(inp)))
    return mse_step(model, keras.optimizers.SGD(0.1)), model.trainable_variables


SIGNATURE = [tf.TensorSpec([None, 6, 4]), tf.TensorSpec([None, 1])]


def test_the_gradient_loop_s_lists_hold_what_the_forward_loop_pushed() -> None:
    step, _ = _step(0)
    concrete = tf.function(step, input_signature=SIGNATURE).get_concrete_function()
    graph = load(concrete, freeze=False).graph
    loops = [n for n in graph if n.op in WHILE_OPS]
    backward = next(n for n in loops if "grad" in n.name)

    def body(loop):  # type: ignore[no-untyped-def]
        return function_graph(
            graph.library, loop.attrs["body"].name, [o.shape for o in loop.outputs]
        )

    found = list_element_shapes(graph, backward, body)
    assert (None, 8) in {shape for shape, _ in found.values()}  # the cell's [batch, units] values
    assert all(dtype in ("float32", "int32") for _, dtype in found.values())
    popped = function_graph(
        graph.library,
        backward.attrs["body"].name,
        [o.shape for o in backward.outputs],
        found,
    )
    values = [n.outputs[1].shape for n in popped if n.op == "TensorListPopBack"]
    assert values and all(shape is not None for shape in values)  # known ranks now


def test_a_keras_lstm_training_step_stitches_its_backward_loop_and_follows_tensorflow() -> None:
    x = tf.random.stateless_normal([5, 6, 4], [1, 2])
    y = tf.random.stateless_normal([5, 1], [3, 4])
    plain, plain_vars = _step(0)
    stitched, stitched_vars = _step(0)
    tf_fn = tf.function(plain, input_signature=SIGNATURE)
    ts_fn = tf_stitch.function(stitched, input_signature=SIGNATURE)
    for _ in range(3):
        np.testing.assert_allclose(float(ts_fn(x, y)), float(tf_fn(x, y)), rtol=1e-5)
    for a, b in zip(plain_vars, stitched_vars, strict=True):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
    kernels = ts_fn.get_optimized(x, y).kernels
    assert any("gradients" in name for k in kernels for name in k.members)  # the backward body
