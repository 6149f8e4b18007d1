"""Variable writes of a stitched kernel's outputs are done by the kernel (StitchedKernelAssign,
no AssignVariableOp to dispatch), in TensorFlow's order, with TensorFlow's values."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import graph_pb2, types_pb2

import tf_stitch
from tf_stitch.graph.variable_writes import ASSIGN_OP, write_in_kernels


def _op_types(optimized: tf_stitch.OptimizedFunction) -> list[str]:
    return [op.type for op in optimized.flat_fn.graph.get_operations()]


def _adam_step(seed: int) -> tuple[Callable[..., tf.Tensor], keras.Model]:
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [keras.Input((6,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)]
    )
    opt = keras.optimizers.Adam(1e-2)
    opt.build(model.trainable_variables)

    def step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x, training=True) - y) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    return step, model


def test_an_adam_step_s_kernels_write_the_variables_and_follow_tensorflow() -> None:
    signature = [tf.TensorSpec([None, 6]), tf.TensorSpec([None, 3])]
    (plain, plain_model), (stitched, stitched_model) = _adam_step(0), _adam_step(0)
    tf_fn = tf.function(plain, input_signature=signature)
    ts_fn = tf_stitch.function(stitched, input_signature=signature)
    x = tf.random.stateless_normal([16, 6], [1, 2])
    y = tf.random.stateless_normal([16, 3], [3, 4])
    expected = [float(tf_fn(x, y)) for _ in range(8)]
    got = [float(ts_fn(x, y)) for _ in range(8)]
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert expected[-1] < expected[0]  # it learns
    for a, b in zip(plain_model.weights, stitched_model.weights, strict=True):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
    optimized = ts_fn.get_optimized(x, y)
    types = _op_types(optimized)
    # 4 weights, their 8 moments: every update is a kernel's output, written by the kernel
    assert len(optimized.written_in_kernels) >= 12
    assert ASSIGN_OP in types
    assert types.count("AssignVariableOp") <= 1  # the iteration count is TensorFlow's add
    names = {op.name for op in optimized.flat_fn.graph.get_operations()}
    assert not any(f"stitched/{write}" in names for write in optimized.written_in_kernels)


def test_a_written_value_that_is_also_returned_is_returned_and_written() -> None:
    v = tf.Variable(tf.ones([4]))

    @tf.function(input_signature=[tf.TensorSpec([4])])
    def fn(x: tf.Tensor) -> tf.Tensor:
        new = tf.tanh(v * x) * 2.0 + 1.0
        v.assign(new)
        return new

    optimized = tf_stitch.optimize(fn)
    x = tf.constant([0.5, -1.0, 2.0, 0.0])
    want = np.tanh(x.numpy()) * 2 + 1
    np.testing.assert_allclose(optimized(x), want, rtol=1e-6)
    np.testing.assert_allclose(v.numpy(), want, rtol=1e-6)
    want = np.tanh(want * x.numpy()) * 2 + 1
    np.testing.assert_allclose(optimized(x), want, rtol=1e-6)
    np.testing.assert_allclose(v.numpy(), want, rtol=1e-6)


def test_a_write_by_a_kernel_is_seen_by_the_next_call_and_by_tensorflow() -> None:
    """A variable written by the kernel, then read by TensorFlow and the next call; in
    copy-on-read mode (after a sparse write) the kernel writes a copy, so a sparse write after
    it changes the variable alone."""
    v = tf.Variable(tf.fill([3, 5], 0.5))

    def step(x: tf.Tensor) -> tf.Tensor:
        v.assign(tf.sigmoid(v * x) - 0.25)
        return tf.reduce_sum(x)

    ts_fn = tf_stitch.function(step, input_signature=[tf.TensorSpec([3, 5])])
    x = tf.random.stateless_normal([3, 5], [5, 6])
    want = np.full([3, 5], 0.5, np.float32)
    for _ in range(3):
        ts_fn(x)
        want = 1 / (1 + np.exp(-want * x.numpy())) - 0.25
        np.testing.assert_allclose(v.numpy(), want, rtol=1e-6, atol=1e-7)
    assert ts_fn.get_optimized(x).written_in_kernels
    v.scatter_nd_update([[0, 0]], [9.0])  # copy-on-read mode from here on
    want[0, 0] = 9.0
    ts_fn(x)
    want = 1 / (1 + np.exp(-want * x.numpy())) - 0.25
    before = v.read_value()
    v.scatter_nd_update([[1, 1]], [-3.0])
    np.testing.assert_allclose(before.numpy(), want, rtol=1e-6, atol=1e-7)
    want[1, 1] = -3.0
    np.testing.assert_allclose(v.numpy(), want, rtol=1e-6, atol=1e-7)


def test_a_validated_write_of_the_wrong_shape_fails_as_tensorflow_s_does() -> None:
    def make() -> tuple[tf.Variable, Callable[..., tf.Tensor]]:
        v = tf.Variable(tf.zeros([3, 5]))

        def step(x: tf.Tensor) -> tf.Tensor:
            v.assign(tf.tanh(x) * 2.0)  # validate_shape=True; the sizes known at run time
            return tf.reduce_sum(x)

        return v, step

    for wrap in (tf.function, tf_stitch.function):
        v, step = make()
        fn = wrap(step, input_signature=[tf.TensorSpec([None, None])])
        fn(tf.ones([3, 5]))
        np.testing.assert_allclose(v.numpy(), np.full([3, 5], np.tanh(1.0) * 2), rtol=1e-6)
        with pytest.raises(tf.errors.InvalidArgumentError, match="shape"):
            fn(tf.ones([5, 3]))
    assert fn.get_optimized(tf.ones([3, 5])).written_in_kernels


# -- the rewrite on GraphDefs ---------------------------------------------------------------------
def _graph(value_readers: int = 1, validate: bool = False, wait_on_kernel: bool = False) -> Any:
    g = graph_pb2.GraphDef()

    def node(name: str, op: str, *inputs: str) -> Any:
        n = g.node.add(name=name, op=op)
        n.input.extend(inputs)
        return n

    w = node("w", "Placeholder")
    w.attr["dtype"].type = types_pb2.DT_RESOURCE
    node("x", "Placeholder").attr["dtype"].type = types_pb2.DT_FLOAT
    read = node("read", "ReadVariableOp", "w")
    read.attr["dtype"].type = types_pb2.DT_FLOAT
    node("k", "StitchedKernel", "read", "x")
    waited = node("late", "Identity", "k") if wait_on_kernel else node("early", "Identity", "x")
    write = node("assign", "AssignVariableOp", "w", "k:1", "^read", f"^{waited.name}")
    if validate:
        write.attr["validate_shape"].b = True
    for i in range(value_readers - 1):
        node(f"other{i}", "Identity", "k:1")
    node("after", "ReadVariableOp", "w", "^assign")
    return g


HANDLES = {"w": SimpleNamespace(device="/job:localhost/replica:0/task:0/device:CPU:0")}


def test_the_kernel_takes_the_write_and_its_waits_and_whatever_waited_on_it() -> None:
    g = _graph()
    targets, moved = write_in_kernels(g, HANDLES, ["k:0"], ["assign", "after"])
    nodes = {n.name: n for n in g.node}
    assert moved == {"assign": "k"} and targets == ["k", "after"]
    kernel = nodes["k"]
    assert kernel.op == ASSIGN_OP and kernel.attr["N"].i == 1
    assert list(kernel.attr["assign_outputs"].list.i) == [1]
    assert list(kernel.input) == ["read", "x", "w", "^read", "^early"]
    assert list(nodes["after"].input) == ["w", "^k"]
    order = [n.name for n in g.node]
    assert order.index("early") < order.index("k") < order.index("after")
    assert list(kernel.attr["validate_shapes"].list.b) == [False]
    g = _graph(validate=True)
    write_in_kernels(g, HANDLES, ["k:0"], ["assign"])
    kernel = next(n for n in g.node if n.name == "k")
    assert list(kernel.attr["validate_shapes"].list.b) == [True]


def test_writes_that_must_stay_assigns() -> None:
    cases = {
        "the value read elsewhere": (_graph(value_readers=2), HANDLES, []),
        "the value fetched": (_graph(), HANDLES, ["k:1"]),
        "waiting on the kernel": (_graph(wait_on_kernel=True), HANDLES, []),
        "a variable on a GPU, no CUDA build": (
            _graph(),
            {"w": SimpleNamespace(device="/job:localhost/replica:0/task:0/device:GPU:0")},
            [],
        ),
    }
    for why, (g, handles, fetches) in cases.items():
        before = g.SerializeToString()
        targets, moved = write_in_kernels(g, handles, fetches, ["assign"])
        assert not moved and targets == ["assign"], why
        assert g.SerializeToString() == before, why  # untouched (no attr added on the way)


def test_a_write_is_not_moved_into_a_kernel_that_a_moved_write_s_waiters_follow() -> None:
    """k2 feeds k; k takes over its write, so what waited for that write now follows k and k2.
    A write of k2's output that waits for such a node stays an assign: in k2 it would wait for
    its own successor."""
    g = graph_pb2.GraphDef()

    def node(name: str, op: str, *inputs: str) -> Any:
        n = g.node.add(name=name, op=op)
        n.input.extend(inputs)
        return n

    for v in ("w", "u"):
        node(v, "Placeholder").attr["dtype"].type = types_pb2.DT_RESOURCE
    node("x", "Placeholder").attr["dtype"].type = types_pb2.DT_FLOAT
    node("k2", "StitchedKernel", "x")
    node("k", "StitchedKernel", "k2:0")
    node("assign", "AssignVariableOp", "w", "k:1")
    node("after", "Identity", "x", "^assign")
    node("assign2", "AssignVariableOp", "u", "k2:1", "^after")
    handles = {name: HANDLES["w"] for name in ("w", "u")}
    targets, moved = write_in_kernels(g, handles, [], ["assign", "assign2"])
    assert moved == {"assign": "k"} and targets == ["k", "assign2"]
    nodes = {n.name: n for n in g.node}
    assert list(nodes["after"].input) == ["x", "^k"] and nodes["k2"].op == "StitchedKernel"
