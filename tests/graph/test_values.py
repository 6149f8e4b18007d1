"""Reading constant values out of the IR."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from graph_helpers import ref, v1_graph

from tf_stitch.graph.ir import Graph
from tf_stitch.graph.values import constant_value, scalar_constant


def build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
    tf.constant([[1.0, 2.0], [3.0, 4.0]], name="matrix")
    tf.constant([[7]], tf.int64, name="one")
    tf.constant(b"text", name="text")
    tf.constant(2.5, name="scalar")
    tf.unstack(tf.constant([1, 2]), name="parts")
    tf.negative(x, name="neg")


@pytest.fixture(scope="module")
def graph() -> Graph:
    return v1_graph(build)


def test_constant_value_of_a_const(graph: Graph) -> None:
    value = constant_value(graph, ref("matrix"))
    assert value is not None and value.dtype == np.float32
    np.testing.assert_array_equal(value, [[1, 2], [3, 4]])


@pytest.mark.parametrize("name", ["neg", "x", "parts:1", "missing", "matrix:1"])
def test_constant_value_is_none_for_anything_else(graph: Graph, name: str) -> None:
    assert constant_value(graph, ref(name)) is None


def test_scalar_constant(graph: Graph) -> None:
    assert scalar_constant(graph, ref("scalar")) == 2.5
    one = scalar_constant(graph, ref("one"))
    assert one == 7 and isinstance(one, int)  # a Python scalar, from a [[7]] tensor


@pytest.mark.parametrize("name", ["matrix", "text", "neg", "missing"])
def test_scalar_constant_is_none_for_non_scalars(graph: Graph, name: str) -> None:
    assert scalar_constant(graph, ref(name)) is None
