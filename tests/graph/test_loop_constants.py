"""sink-loop-constants: frozen weights a loop passes through unchanged are defined in its body
instead of being loop variables; everything else about the loop stays as it was."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from conftest import assert_close
from tensorflow.python.framework.convert_to_constants import (
    convert_variables_to_constants_v2,
)

from tf_stitch.graph.callable import function_from_graph_def
from tf_stitch.graph.freeze import freeze
from tf_stitch.graph.loop_constants import sink_loop_constants

SPEC = tf.TensorSpec([None, 4])
_KEEP: list[tf.Variable] = []  # the functions' variables, alive while the functions are


def _loop(update_weight: bool = False) -> tf.types.experimental.ConcreteFunction:
    _KEEP.append(tf.Variable(tf.random.stateless_normal([4, 4], seed=[3, 4])))
    w = _KEEP[-1]

    @tf.function(input_signature=[SPEC])
    def f(x: tf.Tensor) -> tf.Tensor:
        def body(i: tf.Tensor, h: tf.Tensor, v: tf.Tensor) -> tuple[tf.Tensor, ...]:
            h = tf.tanh(tf.matmul(h, v) + tf.matmul(x, w))  # w: a captured variable
            return i + 1, h, v * 0.5 if update_weight else v  # v: computed, not a Const

        return tf.while_loop(lambda i, h, v: i < 4, body, (0, x, tf.eye(4) * 2.0))[1]

    return f.get_concrete_function()


def _frozen(cf: tf.types.experimental.ConcreteFunction) -> tf.compat.v1.GraphDef:
    return convert_variables_to_constants_v2(cf, lower_control_flow=False).graph.as_graph_def()


def _while(gd: tf.compat.v1.GraphDef) -> tf.compat.v1.NodeDef:
    (node,) = [n for n in gd.node if "While" in n.op]
    return node


def _run(
    cf: tf.types.experimental.ConcreteFunction, gd: tf.compat.v1.GraphDef, x: tf.Tensor
) -> tf.Tensor:
    frozen = freeze(cf)
    return function_from_graph_def(gd, frozen.inputs, frozen.outputs, [SPEC])(x)[0]


def test_a_passed_through_weight_moves_into_the_body() -> None:
    cf = _loop()
    gd = freeze(cf).graph_def
    node = _while(gd)
    body = next(f for f in gd.library.function if f.signature.name == node.attr["body"].func.name)
    assert len(node.input) == len(node.attr["T"].list.type) == len(body.signature.input_arg)
    assert len(body.signature.output_arg) == len(node.attr["output_shapes"].list.shape)
    assert any(n.op == "Const" and n.attr["value"].tensor.tensor_shape.dim for n in body.node_def)
    assert len(node.input) == len(_while(_frozen(cf)).input) - 2  # w and the iteration limit
    x = tf.constant(np.random.default_rng(1).standard_normal([3, 4]), tf.float32)
    assert_close(_run(cf, gd, x), cf(x))


def test_a_weight_the_loop_changes_stays_a_loop_variable() -> None:
    cf = _loop(update_weight=True)
    gd = _frozen(cf)
    assert sink_loop_constants(gd) == 2  # w and the iteration limit, not v
    x = tf.constant(np.random.default_rng(1).standard_normal([3, 4]), tf.float32)
    assert_close(_run(cf, freeze(cf).graph_def, x), cf(x))


def test_a_fetched_loop_keeps_its_outputs() -> None:
    cf = _loop()
    gd = _frozen(cf)
    assert sink_loop_constants(gd, [f"{_while(gd).name}:1"]) == 0
    assert sink_loop_constants(gd) == 2


def test_keras_recurrent_layers_compute_the_same() -> None:
    keras.utils.set_random_seed(5)
    inp = keras.Input((6, 3))
    seq = keras.layers.Bidirectional(keras.layers.LSTM(5, return_sequences=True))(inp)
    model = keras.Model(inp, keras.layers.GRU(4)(seq))
    spec = tf.TensorSpec([None, 6, 3])
    cf = tf.function(
        lambda x: model(x, training=False), input_signature=[spec]
    ).get_concrete_function()
    frozen = freeze(cf)
    gd = frozen.graph_def
    loops = [n for n in gd.node if "While" in n.op]
    unfrozen = [n for n in _frozen(cf).node if "While" in n.op]
    assert len(loops) == 3 and sum(len(n.input) for n in loops) < sum(
        len(n.input) for n in unfrozen
    )
    fn = function_from_graph_def(gd, frozen.inputs, frozen.outputs, [spec])
    x = tf.constant(np.random.default_rng(2).standard_normal([2, 6, 3]), tf.float32)
    assert_close(fn(x)[0], cf(x))
