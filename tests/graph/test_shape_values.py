"""partial_value: the shape arithmetic Keras builds, evaluated as far as it is known."""

from __future__ import annotations

import pytest
import tensorflow as tf
from graph_helpers import ref, v1_graph

from tf_stitch.graph.ir import Graph, Node, TensorInfo, TensorRef
from tf_stitch.graph.shape_values import partial_value


def build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 4, 6], name="x")
    u = tf.compat.v1.placeholder(tf.float32, None, name="u")
    s = tf.shape(x, name="s")
    tail = tf.gather(s, [1, 2], name="tail")
    tf.gather(s, 2, name="last")
    tf.gather(s, 0, name="batch")
    p = tf.reduce_prod(tail, name="prod")
    tf.reduce_sum(tail, name="sum")
    tf.reduce_prod(tail, keepdims=True, name="prod_keep")
    tf.reduce_prod(s, name="prod_unknown")
    tf.stack([tf.gather(s, 0), p], name="pack")
    tf.stack([tail, tail], axis=1, name="pack_axis1")
    tf.concat([tf.gather(s, [0]), [-1], tail], 0, name="concat")
    tf.concat([tf.gather(s, [0]), tf.reshape(p, [1])], 0, name="concat_reshaped")
    tf.identity(tf.cast(s, tf.int64), name="cast_shape")
    tf.gather(s, [3], name="gather_out_of_range")
    tf.gather(s, [-1], name="gather_negative")
    tf.gather(tf.reshape(s, [1, 3]), [0], axis=1, name="gather_axis1")
    tf.shape(u, name="unknown_rank")
    tf.negative(s, name="neg")
    tf.constant([2.0], name="floats")
    tf.constant([[1, 2]], name="matrix")
    tf.constant(5, name="five")
    tf.slice(s, [1], [2], name="slice")
    tf.slice(s, [1], [-1], name="slice_to_end")
    tf.squeeze(tf.slice(s, [2], [1]), name="squeezed")
    tf.slice(s, [2], [5], name="slice_out_of_range")
    tf.reshape(tf.slice(s, [1], [2]), [1, 2], name="reshaped_to_matrix")


@pytest.fixture(scope="module")
def graph() -> Graph:
    return v1_graph(build)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("s", [None, 4, 6]),
        ("tail", [4, 6]),
        ("last", 6),
        ("batch", None),
        ("prod", 24),
        ("sum", 10),
        ("pack", [None, 24]),
        ("concat", [None, -1, 4, 6]),
        ("cast_shape", [None, 4, 6]),
        ("five", 5),
        ("concat_reshaped", [None, 24]),
        ("slice", [4, 6]),
        ("slice_to_end", [4, 6]),
        ("squeezed", 6),
    ],
)
def test_known_parts_are_computed(graph: Graph, name: str, expected: object) -> None:
    assert partial_value(graph, ref(name)) == expected


@pytest.mark.parametrize(
    "name",
    [
        "prod_keep",  # keep_dims changes the rank
        "prod_unknown",  # a factor is unknown
        "pack_axis1",
        "slice_out_of_range",  # TensorFlow rejects it at run time
        "reshaped_to_matrix",  # only scalars and vectors are shape values
        "gather_out_of_range",
        "gather_negative",  # GatherV2 rejects negative indices at run time
        "gather_axis1",
        "unknown_rank",
        "neg",
        "floats",
        "matrix",
        "missing",
    ],
)
def test_anything_not_understood_is_none(graph: Graph, name: str) -> None:
    assert partial_value(graph, ref(name)) is None


def test_deep_chains_give_up() -> None:
    g = Graph()
    g.add(Node("x", "Placeholder", outputs=[TensorInfo("float32", (2, 3))]))
    g.add(Node("id0", "Shape", [TensorRef("x")], outputs=[TensorInfo("int32", (2,))]))
    for i in range(1, 40):
        g.add(
            Node(
                f"id{i}", "Identity", [TensorRef(f"id{i - 1}")], outputs=[TensorInfo("int32", (2,))]
            )
        )
    assert partial_value(g, TensorRef("id10")) == [2, 3]
    assert partial_value(g, TensorRef("id39")) is None
