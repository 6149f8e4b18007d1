"""Library functions as IR graphs and back."""

from __future__ import annotations

import tensorflow as tf
from graph_helpers import graph_of

from tf_stitch.graph.functions import function_graph, function_uses, with_function
from tf_stitch.graph.io import graph_to_graph_def
from tf_stitch.graph.ir import FuncRef, Graph


def _loop_graph() -> Graph:
    def fn(x: tf.Tensor) -> tf.Tensor:
        return tf.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, tf.exp(x) * 0.5), (0, x))[1]

    return graph_of(fn, tf.TensorSpec([None, 4]))


def test_a_body_as_a_graph_and_back_under_a_new_name() -> None:
    graph = _loop_graph()
    (loop,) = [n for n in graph if n.op in ("While", "StatelessWhile")]
    body = loop.attrs["body"].name
    assert function_uses(graph)[body] == 1
    g = function_graph(graph.library, body, [o.shape for o in loop.outputs])
    assert [g.node(r.node).op for r in g.inputs] == ["Placeholder"] * len(loop.outputs)
    assert len(g.outputs) == len(loop.outputs)
    assert {"Exp", "Mul"} <= {n.op for n in g}
    library, name = with_function(graph.library, g, body, replaces=body)
    assert name != body and name.startswith(body.split("_ts")[0])
    graph.library = library
    loop.attrs["body"] = FuncRef(name, {})
    names = {f.signature.name for f in graph_to_graph_def(graph).library.function}
    assert name in names and body not in names
