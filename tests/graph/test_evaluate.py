"""evaluate(): TensorFlow computes values of a part of the graph."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from graph_helpers import fingerprint, ref, v1_graph

from tf_stitch.graph.evaluate import evaluate


def build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
    a = tf.constant([1.0, 4.0], name="a")
    b = tf.sqrt(a, name="b")
    tf.add(b, 1.0, name="c")
    tf.split(tf.range(6, name="r"), 3, name="parts")
    tf.multiply(x, b, name="needs_x")

    @tf.function
    def triple(t: tf.Tensor) -> tf.Tensor:
        return t * 3.0

    tf.identity(triple(a), name="called")


def test_values_of_the_fetches() -> None:
    g = v1_graph(build)
    before = fingerprint(g)
    nodes = [n.name for n in g if n.name not in ("x", "needs_x")]
    b, c, p1, p2 = evaluate(g, nodes, [ref("b"), ref("c"), ref("parts:1"), ref("parts:2")])
    np.testing.assert_array_equal(b, np.float32([1, 2]))
    np.testing.assert_array_equal(c, np.float32([2, 3]))
    np.testing.assert_array_equal(p1, [2, 3])
    np.testing.assert_array_equal(p2, [4, 5])
    assert b.dtype == np.float32 and p1.dtype == np.int32
    assert fingerprint(g) == before


def test_function_calls_use_the_graph_library() -> None:
    g = v1_graph(build)
    call = next(n.name for n in g if n.op in ("PartitionedCall", "StatefulPartitionedCall"))
    (value,) = evaluate(g, ["a", call, "called"], [ref("called")])
    np.testing.assert_array_equal(value, np.float32([3, 12]))


def test_nodes_must_include_everything_the_fetches_read() -> None:
    g = v1_graph(build)
    with pytest.raises(ValueError, match="'b'"):
        evaluate(g, ["b", "c/y", "c"], [ref("c")])


def test_fetching_an_unfed_placeholder_fails() -> None:
    g = v1_graph(build)
    with pytest.raises(tf.errors.InvalidArgumentError, match="x"):
        evaluate(g, ["x", "a", "b", "needs_x"], [ref("needs_x")])
