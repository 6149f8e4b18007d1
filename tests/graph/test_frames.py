"""frame_problem: TensorFlow's rule that a node's inputs are all in one frame, checked before a
rewritten graph is handed to TensorFlow (whose executor would refuse it only when run)."""

from __future__ import annotations

import tensorflow as tf

from tf_stitch.graph.frames import frame_problem
from tf_stitch.graph.io import GraphDef


def _loop_graph_def() -> GraphDef:
    """A TF1 while loop (Enter, Merge, Switch, NextIteration, Exit) and a cond."""
    tf.compat.v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default() as g:
            x = tf.compat.v1.placeholder(tf.float32, [None, 8], name="x")
            _, h = tf.compat.v1.while_loop(
                lambda i, h: i < 3, lambda i, h: (i + 1, tf.tanh(h * 0.5) + x), [0, x]
            )
            tf.identity(tf.sigmoid(h), name="out")
        return g.as_graph_def()
    finally:
        tf.compat.v1.enable_control_flow_v2()


def test_tensorflow_s_own_loop_is_well_formed() -> None:
    graph_def = _loop_graph_def()
    assert {"Enter", "Exit", "NextIteration"} <= {n.op for n in graph_def.node}
    assert frame_problem(graph_def) == ""


def test_a_node_reading_inside_and_outside_a_loop_is_refused() -> None:
    graph_def = _loop_graph_def()
    body_op = next(n for n in graph_def.node if n.op == "Tanh")
    body_op.op = "AddV2"
    body_op.input.append("x")  # x itself, outside the loop's frame, not through its Enter
    body_op.attr["T"].type = tf.float32.as_datatype_enum
    problem = frame_problem(graph_def)
    assert "has inputs from different frames" in problem


def test_tensorflow_refuses_what_frame_problem_refuses() -> None:
    graph_def = _loop_graph_def()
    body_op = next(n for n in graph_def.node if n.op == "Tanh")
    body_op.op = "AddV2"
    body_op.input.append("x")
    with tf.Graph().as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session() as session:
            try:
                session.run("out:0", {"x:0": [[0.0] * 8]})
            except tf.errors.InvalidArgumentError as e:
                assert "different frames" in str(e)
            else:
                raise AssertionError("TensorFlow ran a graph with a node in two frames")


def test_a_missing_input_is_named() -> None:
    graph_def = _loop_graph_def()
    graph_def.node[-1].input[0] = "nowhere"
    assert "nowhere" in frame_problem(graph_def)
