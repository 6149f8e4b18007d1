"""forward-writes: a variable's read-modify-write update becomes a value assigned, and the reads
after it (ordered after it) use that value; unordered or unknown uses stop the forwarding."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf
from graph_helpers import ops, run_pass, v1_graph, v1_graph_def

import tf_stitch
from tf_stitch.graph.io import graph_from_graph_def
from tf_stitch.graph.ir import Graph
from tf_stitch.passes.forward_writes import forward_writes

raw = tf.raw_ops


def _chain(read_after_write: bool, gather: bool = False) -> Callable[[], None]:
    """m0 = read(h); assign_add(h, x); m1 = read(h) [after the write]; out = m0 * m1."""

    def build() -> None:
        h = tf.compat.v1.placeholder(tf.resource, [], name="h")
        x = tf.compat.v1.placeholder(tf.float32, [4], name="x")
        m0 = raw.ReadVariableOp(resource=h, dtype=tf.float32, name="m0")
        with tf.control_dependencies([m0]):
            write = raw.AssignAddVariableOp(resource=h, value=x * 2.0, name="write")
        after = [write]
        if gather:
            with tf.control_dependencies(after):
                g = raw.ResourceGather(resource=h, indices=[0], dtype=tf.float32, name="gather")
            after = [g.op]
        with tf.control_dependencies(after if read_after_write else []):
            m1 = raw.ReadVariableOp(resource=h, dtype=tf.float32, name="m1")
        tf.identity(m0 * m1, name="out")

    return build


def _graph(build: Callable[[], None]) -> Graph:
    return v1_graph(build, inputs=["x:0"], outputs=["out"])


def test_an_update_becomes_an_assign_of_its_value_and_later_reads_use_it() -> None:
    out = run_pass(forward_writes, _graph(_chain(read_after_write=True)))
    write = out.node("write")
    assert write.op == "AssignVariableOp"
    new = out.node(write.inputs[1].node)
    assert new.op == "AddV2" and new.inputs[0].node == "m0"  # the value read before + delta
    product = out.node(out.node("out").inputs[0].node)
    assert [r.node for r in product.inputs] == ["m0", new.name]  # m1 is the written value
    assert new.inputs[1].node == "mul"  # the delta, computed after the read (its control edge)


def test_a_read_not_ordered_after_the_write_is_left_alone() -> None:
    g = _graph(_chain(read_after_write=False))
    out = run_pass(forward_writes, g)
    product = out.node(out.node("out").inputs[0].node)
    assert [r.node for r in product.inputs] == ["m0", "m1"]  # it may see either value


def test_another_op_on_the_variable_stops_forwarding() -> None:
    out = run_pass(forward_writes, _graph(_chain(read_after_write=True, gather=True)))
    assert out.node("write").op == "AssignVariableOp"  # the update before it is still a value
    product = out.node(out.node("out").inputs[0].node)
    assert [r.node for r in product.inputs] == ["m0", "m1"]  # read after the gather: kept


def test_an_update_with_no_read_before_it_and_reads_without_writes() -> None:
    def build() -> None:
        h = tf.compat.v1.placeholder(tf.resource, [], name="h")
        k = tf.compat.v1.placeholder(tf.resource, [], name="k")
        x = tf.compat.v1.placeholder(tf.float32, [4], name="x")
        raw.AssignSubVariableOp(resource=h, value=x, name="write")
        a = raw.ReadVariableOp(resource=k, dtype=tf.float32, name="a")
        b = raw.ReadVariableOp(resource=k, dtype=tf.float32, name="b")
        tf.identity(a + b, name="out")

    g = graph_from_graph_def(v1_graph_def(build), ["x:0"], ["out:0"], targets=["write"])
    out = run_pass(forward_writes, g)
    assert ops(out)["AssignSubVariableOp"] == 1  # the value before it is not known
    total = out.node(out.node("out").inputs[0].node)
    assert [r.node for r in total.inputs] == ["a", "a"]  # no write between: one value


def test_a_training_step_keeps_tensorflows_values_and_updates_with_assigns() -> None:
    def make() -> tuple[Callable[..., tf.Tensor], list[tf.Variable]]:
        w = tf.Variable(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
        m = tf.Variable(tf.zeros([3, 4]))
        v = tf.Variable(tf.zeros([3, 4]))

        def step(x: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.tanh(x @ w) ** 2)
            g = tape.gradient(loss, w)
            m.assign_add((g - m) * 0.1)
            v.assign_add((g * g - v) * 0.001)
            w.assign_sub(0.01 * m / (tf.sqrt(v) + 1e-7))
            return loss

        return step, [w, m, v]

    x = tf.constant(np.random.default_rng(3).standard_normal((5, 3)), tf.float32)
    plain, plain_vars = make()
    stitched, stitched_vars = make()
    spec = [tf.TensorSpec([None, 3], tf.float32)]
    tf_fn = tf.function(plain, input_signature=spec)
    ts_fn = tf_stitch.function(stitched, input_signature=spec)
    for _ in range(4):
        np.testing.assert_allclose(ts_fn(x), tf_fn(x), rtol=1e-6)
    for a, b in zip(plain_vars, stitched_vars, strict=True):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-7)
    graph = ts_fn.get_optimized(x).graph
    assert not ops(graph)["AssignAddVariableOp"] and not ops(graph)["AssignSubVariableOp"]
    assert ops(graph)["AssignVariableOp"] == 3
