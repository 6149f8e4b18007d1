"""The ops of a traced graph as a table: what the FLOP and byte analyses need from each node.

One row per node of the function's graph (the graph TensorFlow optimizes and runs; the executor's
op events carry the same node names, a node Grappler fused into another leaving its name on the
fused node): `name`, `op`, `inputs` (producer tensors `node:index`), the input and output
`*_shapes` (lists, -1 for an unknown dimension; None for an unknown rank) and `*_dtypes`, and the
`attrs` the cost formulas read. The bodies of function calls (`PartitionedCall`,
`StatefulPartitionedCall`: a SavedModel's restored functions) are listed too, their nodes named
as the executor names them once it inlines the call (`<call node>/<node>`), with the shapes
the function was traced with: a dimension it was traced without (a batch of any size) stays
unknown there. Loop and branch bodies (`While`, `If`) are not listed.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import tensorflow as tf

OP_COLUMNS = [
    "name",
    "op",
    "inputs",
    "input_shapes",
    "input_dtypes",
    "output_shapes",
    "output_dtypes",
    "attrs",
]
# Attributes the cost formulas need (transposed operands, einsum equation, pooling window).
COST_ATTRS = ("transpose_a", "transpose_b", "adj_x", "adj_y", "equation", "ksize", "data_format")


def _shape(t: tf.Tensor) -> list[int] | None:
    if t.shape.rank is None:
        return None
    return [-1 if d is None else int(d) for d in t.shape.as_list()]


def _attrs(op: tf.Operation) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in COST_ATTRS:
        try:
            value = op.get_attr(key)
        except (ValueError, TypeError):
            continue
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, list):
            value = [v.decode() if isinstance(v, bytes) else v for v in value]
        out[key] = value
    return out


CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")
MAX_CALL_DEPTH = 8


def _function_graph(graph: Any, name: str) -> Any:
    """The FuncGraph of the function `name` that `graph` (or a graph it is nested in) holds."""
    while graph is not None:
        fn = getattr(graph, "_functions", {}).get(name)
        if fn is not None and isinstance(getattr(fn, "graph", None), tf.Graph):
            return fn.graph
        graph = getattr(graph, "outer_graph", None)
    return None


def _collect(graph: tf.Graph, prefix: str, rows: list[dict[str, Any]], depth: int) -> None:
    for op in graph.get_operations():
        rows.append(
            {
                "name": prefix + op.name,
                "op": op.type,
                "inputs": [prefix + t.name for t in op.inputs],
                "input_shapes": [_shape(t) for t in op.inputs],
                "input_dtypes": [t.dtype.name for t in op.inputs],
                "output_shapes": [_shape(t) for t in op.outputs],
                "output_dtypes": [t.dtype.name for t in op.outputs],
                "attrs": _attrs(op),
            }
        )
        if op.type in CALL_OPS and depth < MAX_CALL_DEPTH:
            body = _function_graph(graph, op.get_attr("f").name)
            if body is not None:
                _collect(body, f"{prefix}{op.name}/", rows, depth + 1)


def op_table(graph: tf.Graph) -> pd.DataFrame:
    """The table of `graph`'s nodes and its called functions' (see the module doc)."""
    rows: list[dict[str, Any]] = []
    _collect(graph, "", rows, 0)
    return pd.DataFrame(rows, columns=OP_COLUMNS)
