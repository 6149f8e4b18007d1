"""load(): every accepted kind of object becomes a Graph (variables live, or frozen when asked);
everything else is refused."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close
from graph_helpers import ops, ref, run_ir, spec, v1_graph_def

from tf_stitch.graph.frontends import concrete_function_of, load
from tf_stitch.graph.ir import TensorInfo


def double(x: tf.Tensor) -> tf.Tensor:
    return x * 2.0


def graph_def() -> tf.compat.v1.GraphDef:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        tf.identity(x + 1.0, name="y")

    return v1_graph_def(build)


def test_graph_def_and_its_bytes() -> None:
    gd = graph_def()
    for obj in (gd, gd.SerializeToString()):
        fe = load(obj)
        assert fe.kind == "graph_def" and fe.structured_inputs is None
        assert fe.graph.inputs == [ref("x")] and fe.graph.outputs == [ref("y")]
    fe = load(gd, inputs=["x:0"], outputs=["add:0"])
    assert fe.graph.outputs == [ref("add")]


def test_graph_def_refuses_an_input_signature() -> None:
    with pytest.raises(TypeError, match="input_signature applies to functions"):
        load(graph_def(), input_signature=[spec(3)])


def test_functions_refuse_tensor_names() -> None:
    cf = tf.function(double).get_concrete_function(spec(3))
    with pytest.raises(TypeError, match="inputs=/outputs= name tensors of a GraphDef"):
        load(cf, outputs=["y"])


def test_concrete_function() -> None:
    cf = tf.function(double).get_concrete_function(spec(None, 3))
    fe = load(cf)
    assert fe.kind == "concrete_function"
    assert fe.structured_inputs == cf.structured_input_signature
    assert [fe.graph.info(r) for r in fe.graph.inputs] == [TensorInfo("float32", (None, 3))]
    assert fe.graph.info(fe.graph.outputs[0]) == TensorInfo("float32", (None, 3))
    x = np.ones((2, 3), np.float32)
    assert_close(run_ir(fe.graph, {str(fe.graph.inputs[0]): x}), [x * 2.0])


def test_concrete_function_refuses_a_second_signature() -> None:
    cf = tf.function(double).get_concrete_function(spec(3))
    with pytest.raises(TypeError, match="already has its signature"):
        load(cf, input_signature=[spec(3)])


def test_tf_function_with_declared_or_given_signature() -> None:
    declared = tf.function(double, input_signature=[spec(4)])
    assert load(declared).graph.info(ref("x")) == TensorInfo("float32", (4,))
    given = load(tf.function(double), input_signature=[spec(None, 2)])
    assert given.graph.info(ref("x")) == TensorInfo("float32", (None, 2))


def test_tf_function_without_signature_says_what_to_pass() -> None:
    with pytest.raises(
        TypeError,
        match=r"cannot trace 'double' without an input signature.*"
        r"input_signature=\[tf.TensorSpec",
    ):
        load(tf.function(double))


def test_variables_are_frozen_into_constants_when_asked() -> None:
    v = tf.Variable([1.0, 2.0, 3.0])
    fe = load(tf.function(lambda x: x * v), input_signature=[spec(3)], freeze=True)
    assert not {"ReadVariableOp", "VarHandleOp", "ResourceGather"} & set(ops(fe.graph))
    v.assign([5.0, 5.0, 5.0])  # later changes are not seen, as documented
    x = np.ones(3, np.float32)
    assert_close(run_ir(fe.graph, {str(fe.graph.inputs[0]): x}), [np.float32([1, 2, 3])])


def test_keras_model_is_frozen_in_inference_mode() -> None:
    inp = keras.Input((4,))
    out = keras.layers.Dropout(0.9)(keras.layers.Dense(3, activation="relu")(inp))
    model = keras.Model(inp, out)
    fe = load(model, freeze=True)
    assert fe.kind == "concrete_function" and len(fe.graph.inputs) == 1
    assert "ReadVariableOp" not in ops(fe.graph)
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    got = run_ir(fe.graph, {str(fe.graph.inputs[0]): x})
    assert_close([model(x, training=False).numpy()], got)


def test_keras_model_with_two_inputs() -> None:
    a, b = keras.Input((3,)), keras.Input((3,))
    model = keras.Model([a, b], keras.layers.Add()([a, b]))
    g = load(model).graph
    assert len(g.inputs) == 2
    xa, xb = np.ones((2, 3), np.float32), np.full((2, 3), 2.0, np.float32)
    got = run_ir(g, {str(g.inputs[0]): xa, str(g.inputs[1]): xb})
    assert_close([xa + xb], got)


def test_unbuilt_keras_model_asks_for_a_signature() -> None:
    model = keras.Sequential([keras.layers.Dense(2)])
    with pytest.raises(TypeError, match=r"no known inputs.*input_signature"):
        load(model)
    fe = load(model, input_signature=[spec(None, 5)])
    assert fe.graph.info(fe.graph.outputs[0]) == TensorInfo("float32", (None, 2))


def test_subclassed_keras_model_asks_for_a_signature() -> None:
    class Scale(keras.Model):
        def call(self, x: tf.Tensor) -> tf.Tensor:
            return x * 3.0

    model = Scale()
    model(np.ones((1, 2), np.float32))  # built by a call, but still without `inputs`
    with pytest.raises(TypeError, match=r"no known inputs \(it is subclassed.*input_signature="):
        load(model)
    g = load(model, input_signature=[spec(None, 2)]).graph
    assert_close(
        [np.full((1, 2), 3.0, np.float32)],
        run_ir(g, {str(g.inputs[0]): np.ones((1, 2), np.float32)}),
    )


@pytest.mark.parametrize("bad", [42, "model.pb", double, None, [graph_def()]])
def test_other_objects_are_type_errors_listing_what_is_accepted(bad: object) -> None:
    with pytest.raises(TypeError, match=r"expects a GraphDef .*Keras model; got"):
        load(bad)


def test_concrete_function_of_a_tf_function() -> None:
    cf = concrete_function_of(tf.function(double), [spec(2)])
    assert cf.structured_input_signature[0][0].shape == (2,)


def test_a_function_that_fails_to_trace_says_so() -> None:
    def bad(x: tf.Tensor) -> tf.Tensor:
        return tf.split(x, [4, 8], axis=1)[0]  # x has one column

    with pytest.raises(ValueError, match=r"(?s)tracing 'bad' failed: .*can't split axis"):
        load(tf.function(bad, input_signature=[spec(None, 1)]))
