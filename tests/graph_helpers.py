"""Helpers for the graph and pass tests: build tiny graphs, run them in TensorFlow, compare."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from conftest import assert_close

from tf_stitch.graph.frontends import load
from tf_stitch.graph.io import graph_from_graph_def, graph_to_graph_def
from tf_stitch.graph.ir import Graph, TensorRef
from tf_stitch.passes.base import Pass, PassContext


def spec(*shape: int | None, dtype: tf.DType = tf.float32) -> tf.TensorSpec:
    return tf.TensorSpec(shape, dtype)


def graph_of(fn: Callable[..., Any], *specs: tf.TensorSpec) -> Graph:
    """The frozen IR of `fn` traced with `specs`."""
    return load(tf.function(fn).get_concrete_function(*specs)).graph


def prepared(fn: Callable[..., Any], *specs: tf.TensorSpec) -> Graph:
    """The graph as the `stitch` pass sees it: every pipeline pass before it has run."""
    from tf_stitch.passes.pipeline import PIPELINE

    graph = graph_of(fn, *specs)
    ctx = PassContext()
    for p in PIPELINE[: [p.name for p in PIPELINE].index("stitch")]:
        graph = p.run(graph, ctx)
    return graph


def v1_graph_def(build: Callable[[], Any]) -> Any:
    """The GraphDef of whatever `build()` creates in a fresh tf.compat.v1 graph."""
    with tf.Graph().as_default() as g:
        build()
    return g.as_graph_def()


def v1_graph(
    build: Callable[[], Any],
    inputs: Sequence[str] | None = None,
    outputs: Sequence[str] | None = None,
) -> Graph:
    return graph_from_graph_def(v1_graph_def(build), inputs, outputs)


def ops(graph: Graph) -> Counter[str]:
    return Counter(n.op for n in graph)


def fingerprint(graph: Graph) -> tuple[Any, ...]:
    """Everything observable about a graph, comparable with ==."""
    gd = graph_to_graph_def(graph).SerializeToString(deterministic=True)
    infos = [(n.name, tuple(n.outputs)) for n in graph]
    return gd, infos, list(graph.inputs), list(graph.outputs), list(graph.targets)


def run_pass(p: Pass, graph: Graph) -> Graph:
    """Runs one pass and checks it left its input untouched."""
    before = fingerprint(graph)
    out = p.run(graph, PassContext())
    assert fingerprint(graph) == before, f"{p.name} modified its input graph"
    assert out is not graph
    return out


def feeds_for(graph: Graph, batch: int = 3, seed: int = 0) -> dict[str, np.ndarray]:
    """Random values for every input of `graph` (unknown dimensions become `batch`)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for ref in graph.inputs:
        info = graph.info(ref)
        shape = [batch if d is None else d for d in info.shape or ()]
        np_dtype = tf.as_dtype(info.dtype).as_numpy_dtype
        if info.dtype == "bool":
            feeds[str(ref)] = rng.random(shape) > 0.5
        else:
            feeds[str(ref)] = rng.standard_normal(shape).astype(np_dtype)
    return feeds


def run_graph_def(gd: Any, feeds: dict[str, Any], fetches: Sequence[str]) -> list[np.ndarray]:
    """Imports `gd` into a fresh graph and runs `fetches` in a Session."""
    with tf.Graph().as_default() as g:
        tf.graph_util.import_graph_def(gd, name="")
        fd = {g.get_tensor_by_name(k): v for k, v in feeds.items()}
        with tf.compat.v1.Session(graph=g) as sess:
            return list(sess.run([g.get_tensor_by_name(f) for f in fetches], fd))


def run_ir(graph: Graph, feeds: dict[str, Any]) -> list[np.ndarray]:
    return run_graph_def(graph_to_graph_def(graph), feeds, [str(r) for r in graph.outputs])


def assert_same_values(before: Graph, after: Graph, batch: int = 3, **tol: float) -> None:
    """`after` computes what `before` computes, for the same feeds, on random inputs."""
    assert [str(r) for r in after.inputs] == [str(r) for r in before.inputs]
    assert [str(r) for r in after.outputs] == [str(r) for r in before.outputs]
    for seed in (0, 1):
        feeds = feeds_for(before, batch, seed)
        assert_close(run_ir(before, feeds), run_ir(after, feeds), **tol)


def ref(name: str) -> TensorRef:
    return TensorRef.parse(name)


def mse_step(model: Any, optimizer: Any) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """One training step of a Keras `model` on the mean squared error of (x, y), applied by
    `optimizer`: the loss before the update."""

    def step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    return step
