"""`Context.late_order`: a topological order with each node as late as it can go, so that a
node reading only weights sits next to its consumer (the cycle check's windows stay short)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
from graph_helpers import v1_graph_def

from tf_stitch.fusion.legality import Context
from tf_stitch.graph.io import graph_from_graph_def
from tf_stitch.graph.ir import Graph


def _graph(build: Callable[[], Any]) -> Graph:
    return graph_from_graph_def(v1_graph_def(build))


def _edges_go_forward(graph: Graph, order: dict[str, int]) -> bool:
    return all(
        order[p] < order[name]
        for name, node in graph.nodes.items()
        for p in graph.predecessors(node)
    )


def test_a_node_reading_only_weights_goes_next_to_its_consumer() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [4, 8], name="x")
        scale = tf.constant(np.ones(8, np.float32), name="scale")
        neg = tf.negative(scale, name="neg_scale")  # reads only a weight
        h = x
        for i in range(6):
            h = tf.nn.relu(h * 2.0, name=f"relu{i}")
        tf.identity(h * neg, name="out")

    graph = _graph(build)
    ctx = Context(graph)
    late = ctx.late_order
    assert sorted(late.values()) == list(range(len(graph.nodes)))
    assert _edges_go_forward(graph, late)
    assert ctx.order["neg_scale"] < ctx.order["relu0"]  # the usual order: at the start
    consumer = min(late[c] for c in ctx.successors["neg_scale"])
    assert late["neg_scale"] > late["relu5"] and consumer - late["neg_scale"] <= 2


def test_it_is_topological_on_random_graphs() -> None:
    rng = random.Random(0)
    for case in range(50):

        def build() -> None:
            values = [tf.compat.v1.placeholder(tf.float32, [2], name="x0")]
            values += [tf.constant(np.float32(i), name=f"w{i}") for i in range(3)]
            for i in range(rng.randint(3, 30)):
                a, b = rng.choice(values), rng.choice(values)
                values.append(tf.add(a, b, name=f"n{i}"))

        graph = _graph(build)
        assert _edges_go_forward(graph, Context(graph).late_order), case
