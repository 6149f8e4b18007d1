"""freeze(): variables become constants, loops and conditionals stay functional ops in the
GraphDef, and TensorFlow still lowers them to dataflow when it runs the graph."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from conftest import assert_close
from tensorflow.core.framework import graph_pb2
from tensorflow.python.framework.convert_to_constants import (
    convert_variables_to_constants_v2,
)

import tf_stitch
from tf_stitch.graph.callable import function_from_graph_def
from tf_stitch.graph.freeze import LOWER, freeze, restore_lowering
from tf_stitch.launches.op_launches import count_tf_launches

SPEC = tf.TensorSpec([None, 8])


_W: list[tf.Variable] = []  # the loop's weights, alive as long as the functions reading them


def _loop_function() -> tf.types.experimental.ConcreteFunction:
    _W.append(tf.Variable(tf.random.stateless_normal([8, 8], seed=[1, 2])))
    w = _W[-1]

    @tf.function(input_signature=[SPEC])
    def f(x: tf.Tensor) -> tf.Tensor:
        def body(i: tf.Tensor, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            h = tf.tanh(tf.matmul(h, w) + x)
            return i + 1, tf.cond(i > 2, lambda: h * 0.5, lambda: h)

        return tf.while_loop(lambda i, h: i < 5, body, (0, x))[1]

    return f.get_concrete_function()


def _matmul_nodes_run(graph_def: graph_pb2.GraphDef, inputs: list[str], outputs: list[str]) -> set:
    fn = function_from_graph_def(graph_def, inputs, outputs, [SPEC])
    runs = count_tf_launches(fn, [tf.ones([2, 8])]).runs
    return {r.node for r in runs if "MatMul" in r.op}


def test_control_flow_stays_functional_and_is_lowered_when_run() -> None:
    cf = _loop_function()
    frozen = freeze(cf)
    gd = frozen.graph_def
    flow = [n for n in gd.node if n.op in ("While", "StatelessWhile")]
    flow += [n for f in gd.library.function for n in f.node_def if "If" in n.op]
    assert len(flow) == 2 and all(n.attr[LOWER].b for n in flow)
    assert not any(n.op == "Enter" for n in gd.node)  # not lowered in the GraphDef
    inputs, outputs = frozen.inputs, frozen.outputs
    # TensorFlow lowers the loop: its body's MatMul runs as a node of the caller's graph.
    assert all("/body/" in name for name in _matmul_nodes_run(gd, inputs, outputs))
    # convert_variables_to_constants_v2's own marks: each iteration is a call of the body.
    unlowered = convert_variables_to_constants_v2(cf, lower_control_flow=False)
    assert not any(
        "/body/" in n for n in _matmul_nodes_run(unlowered.graph.as_graph_def(), inputs, outputs)
    )


def test_optimized_loops_are_lowered_when_run() -> None:
    cf = _loop_function()
    optimized = tf_stitch.optimize(cf)
    x = tf.constant(np.random.default_rng(0).standard_normal([3, 8]), tf.float32)
    assert_close(optimized(x), cf(x))
    runs = count_tf_launches(optimized, [x]).runs
    names = {r.node for r in runs if "MatMul" in r.op or r.op == "StitchedKernel"}
    assert names and all("/body/" in name for name in names)  # (its matmul is in a kernel)


def test_marks_follow_the_original_by_name() -> None:
    def graph(marks: dict[str, bool | None]) -> graph_pb2.GraphDef:
        gd = graph_pb2.GraphDef()
        for name, mark in marks.items():
            node = gd.node.add(name=name, op="While")
            if mark is not None:
                node.attr[LOWER].b = mark
        return gd

    original = graph({"a": True, "b": False, "c": None})
    frozen = graph({"a": False, "b": False, "c": False, "renamed": False})
    assert restore_lowering(frozen, original) == 2
    assert [n.attr[LOWER].b for n in frozen.node] == [True, False, False, True]
    frozen = graph({"renamed": False})  # an original that lowers nothing: nothing is lowered
    assert restore_lowering(frozen, graph({"b": False})) == 0


def test_the_graph_keeps_its_inputs_and_only_what_the_outputs_need() -> None:
    """Freezing without building a function: an unused input stays an input, nodes no output
    needs are dropped, no colocation names a node the passes may remove, and the result is
    in topological order."""
    v = tf.Variable(tf.ones([4]))

    @tf.function(input_signature=[tf.TensorSpec([None, 4]), tf.TensorSpec([None, 4])])
    def f(x: tf.Tensor, unused: tf.Tensor) -> tf.Tensor:
        tf.exp(x, name="dead")
        return tf.nn.relu(x * v)

    frozen = freeze(f.get_concrete_function())
    names = [n.name for n in frozen.graph_def.node]
    assert frozen.inputs == ["x:0", "unused:0"] and "unused" in names
    assert "dead" not in names and not any(n.op == "VarHandleOp" for n in frozen.graph_def.node)
    assert not any("_class" in n.attr for n in frozen.graph_def.node)
    seen: set[str] = set()
    for n in frozen.graph_def.node:
        assert all(i.lstrip("^").split(":")[0] in seen for i in n.input), n.name
        seen.add(n.name)


def test_hold_keeps_large_read_only_weights_out_of_the_graph_def() -> None:
    _W.append(tf.Variable(tf.random.stateless_normal([64, 64], seed=[3, 4]), name="big"))
    _W.append(tf.Variable(tf.random.stateless_normal([8], seed=[5, 6]), name="small"))
    _W.append(tf.Variable(tf.random.stateless_normal([64, 64], seed=[7, 8]), name="looped"))
    big, small, looped = _W[-3:]

    @tf.function(input_signature=[tf.TensorSpec([None, 64])])
    def f(x: tf.Tensor) -> tf.Tensor:
        h = tf.matmul(x, big)
        h = tf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, tf.matmul(h, looped)), (0, h))
        return h[1][:, :8] + small

    cf = f.get_concrete_function()
    frozen = freeze(cf, hold=True)
    by_name = {n.name: n for n in frozen.graph_def.node}
    assert len(frozen.held) == 1  # not the loop's weight: a loop needs a constant
    (name, value) = next(iter(frozen.held.items()))
    assert by_name[name].op == "Placeholder" and np.array_equal(value, big.numpy())
    contents = [
        n.attr["value"].tensor.tensor_content for n in frozen.graph_def.node if n.op == "Const"
    ]
    assert value.tobytes() not in contents
    # The IR holds it as a constant again, and the optimized function computes f.
    graph = tf_stitch.graph.io.graph_from_graph_def(
        frozen.graph_def, frozen.inputs, frozen.outputs, frozen.held
    )
    assert graph.node(name).op == "Const"
    x = tf.random.stateless_normal([3, 64], seed=[9, 9])
    assert_close([f(x)], [tf_stitch.optimize(f)(x)])
