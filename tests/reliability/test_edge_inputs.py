"""Inputs at the edges: cycles, scalars, zero-size tensors and dtypes that are not fused.
Each optimized graph gives TensorFlow's answer (or a clear error for a bad graph)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close
from tensorflow.core.framework import graph_pb2

import tf_stitch

pytestmark = pytest.mark.usefixtures("kernel_cache")


def cyclic_graph_def() -> graph_pb2.GraphDef:
    gd = graph_pb2.GraphDef()
    x = gd.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = tf.float32.as_datatype_enum
    for name, other in (("a", "b"), ("b", "a")):
        n = gd.node.add(name=name, op="AddV2", input=["x", other])
        n.attr["T"].type = tf.float32.as_datatype_enum
    return gd


def test_a_cycle_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"cannot import this GraphDef: .*cycle"):
        tf_stitch.optimize(cyclic_graph_def(), outputs=["a"])


def test_a_missing_input_is_a_clear_error() -> None:
    gd = cyclic_graph_def()
    gd.node[1].input[1] = "nope"
    with pytest.raises(ValueError, match=r"cannot import this GraphDef.*nope"):
        tf_stitch.optimize(gd, outputs=["a"])


def check(fn, *specs: tf.TensorSpec, feeds: list[list[np.ndarray]]) -> tf_stitch.OptimizedFunction:
    concrete = tf.function(fn).get_concrete_function(*specs)
    optimized = tf_stitch.optimize(concrete)
    for args in feeds:
        assert_close(concrete(*args), optimized(*args))
    return optimized


def test_scalars_in_and_out() -> None:
    def fn(x, s):
        y = tf.tanh(x * s + 1.0)
        return tf.reduce_sum(y), y * tf.exp(s)

    rng = np.random.default_rng(0)
    optimized = check(
        fn,
        tf.TensorSpec([None, 5], tf.float32),
        tf.TensorSpec([], tf.float32),
        feeds=[
            [rng.standard_normal((3, 5)).astype(np.float32), np.float32(0.5)],
            [np.zeros((0, 5), np.float32), np.float32(-2.0)],
        ],
    )
    assert optimized.kernels


def test_a_scalar_only_graph() -> None:
    check(
        lambda a, b: tf.sqrt(tf.abs(a * b) + 1.0) - tf.minimum(a, b),
        tf.TensorSpec([], tf.float32),
        tf.TensorSpec([], tf.float32),
        feeds=[[np.float32(3.0), np.float32(-4.0)], [np.float32(0.0), np.float32(np.nan)]],
    )


@pytest.mark.parametrize("shape", [(0, 7), (4, 0), (0, 0), (2, 0, 3)])
def test_zero_size_tensors(shape: tuple[int, ...]) -> None:
    def fn(x):
        m = tf.reduce_max(x, axis=-1, keepdims=True)
        e = tf.exp(x - m)
        return e / (tf.reduce_sum(e, axis=-1, keepdims=True) + 1.0), tf.reduce_sum(x * x, axis=0)

    spec = tf.TensorSpec([None] * len(shape), tf.float32)
    check(fn, spec, feeds=[[np.zeros(shape, np.float32)], [np.ones((2,) * len(shape), np.float32)]])


@pytest.mark.parametrize(
    ("dtype", "value"),
    [
        (tf.int64, np.arange(12, dtype=np.int64).reshape(3, 4)),
        (tf.int32, np.arange(12, dtype=np.int32).reshape(3, 4)),
        (tf.complex64, (np.arange(12) + 1j * np.arange(12)).astype(np.complex64).reshape(3, 4)),
    ],
)
def test_other_dtypes_next_to_fused_float_ops(dtype: tf.DType, value: np.ndarray) -> None:
    def fn(x, f):
        other = x * x + x  # not float32: stays TensorFlow's
        return other, tf.nn.relu(f * 2.0 - 1.0) + tf.cast(
            tf.reduce_sum(tf.abs(x), axis=1), tf.float32
        )[:, None]

    f = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    check(
        fn,
        tf.TensorSpec([None, 4], dtype),
        tf.TensorSpec([None, 4], tf.float32),
        feeds=[[value, f]],
    )


def test_strings_and_bools_pass_through() -> None:
    def fn(s, x):
        joined = tf.strings.join([s, s], separator="-")
        return joined, tf.where(x > 0.0, x * 3.0, -x), tf.logical_not(x > 1.0)

    s = np.array([b"a", b"bc", b""], dtype=object)
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    concrete = tf.function(fn).get_concrete_function(
        tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.float32)
    )
    optimized = tf_stitch.optimize(concrete)
    want, got = concrete(s, x), optimized(s, x)
    assert want[0].numpy().tolist() == got[0].numpy().tolist()
    assert_close(want[1:], got[1:])


def test_a_feed_in_the_middle_of_a_chain() -> None:
    """A GraphDef fed at an intermediate tensor (`inputs=`) computes from the fed value."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 8], name="x")
        a = tf.tanh(x * 2.0, name="a")
        mid = tf.exp(a - 1.0, name="mid")
        b = tf.reduce_sum(mid * a, axis=1, keepdims=True, name="b")
        tf.identity(mid / (b + 1.0), name="out")
    optimized = tf_stitch.optimize(g.as_graph_def(), inputs=["x:0", "mid:0"], outputs=["out:0"])
    assert any(n.op == "StitchedKernel" for n in optimized.node)
    rng = np.random.default_rng(3)
    feeds = {"x:0": rng.standard_normal((3, 8)), "mid:0": rng.standard_normal((3, 8))}
    with tf.compat.v1.Session(graph=g) as sess:
        want = sess.run("out:0", feeds)
    with tf.Graph().as_default() as g2:
        tf.graph_util.import_graph_def(optimized, name="")
    with tf.compat.v1.Session(graph=g2) as sess:
        got = sess.run("out:0", feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_loops_and_conditionals_stay_tensorflows() -> None:
    """tf.cond and tf.while_loop stay functional ops (If, While) around which the rest is
    stitched; lowered, a loop's back edge made the graph cyclic for the optimizer."""

    def fn(x):
        y = tf.cond(tf.reduce_sum(x) > 0, lambda: tf.nn.softmax(x * 2.0), lambda: tf.tanh(x) + 1.0)
        z = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, tf.nn.relu(v) * 0.5), [0, y])
        return tf.nn.gelu(z[1] * y + 1.0)

    optimized = check(
        fn,
        tf.TensorSpec([None, 8], tf.float32),
        feeds=[[np.full((4, 8), s, np.float32) + np.eye(4, 8, dtype=np.float32)] for s in (1, -1)],
    )
    ops = {n.op for n in optimized.graph_def.node}
    assert optimized.kernels and {"StatelessIf", "StatelessWhile"} & ops | {"If", "While"} & ops
