"""make-control-flow-stateless: frozen loops and conditionals without stateful ops become
StatelessWhile/StatelessIf, so tf.function no longer chains them in program order."""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import (
    convert_variables_to_constants_v2,
)

from tf_stitch.graph.callable import function_from_graph_def
from tf_stitch.graph.freeze import freeze
from tf_stitch.graph.stateless_control_flow import make_control_flow_stateless

SPEC = tf.TensorSpec([None, 4])
_KEEP: list[tf.Variable] = []


def _two_loops(stateful_body: bool) -> tf.types.experimental.ConcreteFunction:
    _KEEP.append(tf.Variable(tf.ones([4, 4])))
    w = _KEEP[-1]

    @tf.function(input_signature=[SPEC])
    def f(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        def body(i: tf.Tensor, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            h = tf.matmul(h, w)
            if stateful_body:
                h += tf.random.uniform(tf.shape(h))
            return i + 1, tf.cond(i > 1, lambda: h * 0.5, lambda: h)

        a = tf.while_loop(lambda i, h: i < 3, body, (0, x))[1]
        b = tf.while_loop(lambda i, h: i < 2, body, (0, x + 1.0))[1]
        return a, b

    return f.get_concrete_function()


def _ops(gd: tf.compat.v1.GraphDef) -> list[str]:
    return sorted(
        n.op
        for n in [*gd.node, *(m for f in gd.library.function for m in f.node_def)]
        if "While" in n.op or "If" in n.op
    )


def test_loops_of_frozen_reads_become_stateless_and_run_side_by_side() -> None:
    cf = _two_loops(stateful_body=False)
    frozen = freeze(cf)
    gd = frozen.graph_def
    assert _ops(gd) == ["StatelessIf", "StatelessIf", "StatelessWhile", "StatelessWhile"]
    fn = function_from_graph_def(gd, frozen.inputs, frozen.outputs, [SPEC])
    loops = [op for op in fn.graph.get_operations() if "While" in op.type]
    assert len(loops) == 2 and all(not op.control_inputs for op in loops)
    x = tf.ones([2, 4])
    for got, want in zip(fn(x), cf(x), strict=True):
        tf.debugging.assert_near(got, want)
    # Left stateful, tf.function's automatic control dependencies order one loop after the other.
    unfrozen = convert_variables_to_constants_v2(cf, lower_control_flow=False)
    fn = function_from_graph_def(
        unfrozen.graph.as_graph_def(),
        frozen.inputs,
        frozen.outputs,
        [SPEC],
    )
    loops = [op for op in fn.graph.get_operations() if "While" in op.type]
    assert any(op.control_inputs for op in loops)


def test_a_stateful_op_anywhere_inside_keeps_the_ops_stateful() -> None:
    gd = convert_variables_to_constants_v2(_two_loops(stateful_body=True), lower_control_flow=False)
    gd = gd.graph.as_graph_def()
    assert make_control_flow_stateless(gd) == 0  # the conds are StatelessIf already
    assert _ops(gd) == ["StatelessIf", "StatelessIf", "While", "While"]


def test_unknown_ops_and_functions_count_as_stateful() -> None:
    gd = tf.compat.v1.GraphDef()
    gd.node.add(name="loop", op="While").attr["body"].func.name = "missing"
    gd.node[0].attr["cond"].func.name = "missing"
    f = gd.library.function.add()
    f.signature.name = "branch"
    f.node_def.add(name="odd", op="NotARegisteredOp")
    branch = gd.node.add(name="cond", op="If")
    branch.attr["then_branch"].func.name = branch.attr["else_branch"].func.name = "branch"
    assert make_control_flow_stateless(gd) == 0
