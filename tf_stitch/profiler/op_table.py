"""The ops of a traced graph as a table: what the FLOP and byte analyses need from each node.

One row per node of the function's graph (the graph TensorFlow optimizes and runs; the executor's
op events carry the same node names, a node Grappler fused into another leaving its name on the
fused node): `name`, `op`, `inputs` (producer tensors `node:index`), the input and output
`*_shapes` (lists, -1 for an unknown dimension; None for an unknown rank) and `*_dtypes`, and the
`attrs` the cost formulas read. Nodes of nested function bodies (while loops, calls) are not
listed.
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


def op_table(graph: tf.Graph) -> pd.DataFrame:
    """The table of `graph`'s nodes (see the module doc)."""
    rows = [
        {
            "name": op.name,
            "op": op.type,
            "inputs": [t.name for t in op.inputs],
            "input_shapes": [_shape(t) for t in op.inputs],
            "input_dtypes": [t.dtype.name for t in op.inputs],
            "output_shapes": [_shape(t) for t in op.outputs],
            "output_dtypes": [t.dtype.name for t in op.outputs],
            "attrs": _attrs(op),
        }
        for op in graph.get_operations()
    ]
    return pd.DataFrame(rows, columns=OP_COLUMNS)
