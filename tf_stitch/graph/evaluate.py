"""Runs part of a graph with TensorFlow (for constant folding)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from tf_stitch.graph.io import graph_to_graph_def
from tf_stitch.graph.ir import Graph, TensorRef


def evaluate(graph: Graph, nodes: Sequence[str], fetches: Sequence[TensorRef]) -> list[np.ndarray]:
    """Values of `fetches`, computing only `nodes` (which must contain all they read)."""
    sub = Graph(
        {n: graph.node(n).copy() for n in nodes}, library=graph.library, versions=graph.versions
    )
    for node in sub:
        node.device = ""  # constants are folded here, on the CPU, wherever they will run
    gd = graph_to_graph_def(sub)
    with tf.Graph().as_default() as g:
        tf.graph_util.import_graph_def(gd, name="")
        tensors = [g.get_tensor_by_name(str(r)) for r in fetches]
        with tf.compat.v1.Session(graph=g, config=_cpu_only()) as sess:
            return list(sess.run(tensors))


def _cpu_only() -> tf.compat.v1.ConfigProto:
    return tf.compat.v1.ConfigProto(device_count={"GPU": 0}, allow_soft_placement=True)
