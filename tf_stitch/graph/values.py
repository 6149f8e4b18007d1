"""Reading constant values out of the IR."""

from __future__ import annotations

from typing import Any

import numpy as np

from tf_stitch.graph.ir import Graph, TensorRef, TensorValue


def constant_value(graph: Graph, ref: TensorRef) -> np.ndarray | None:
    """The value of `ref` if a Const node produces it and it is not fed, else None."""
    if ref in graph.inputs:  # a fed Const holds whatever is fed
        return None
    node = graph.nodes.get(ref.node)
    if node is None or node.op != "Const" or ref.index != 0:
        return None
    value = node.attrs.get("value")
    if not isinstance(value, TensorValue):
        return None
    return np.asarray(value.array)


def scalar_constant(graph: Graph, ref: TensorRef) -> Any | None:
    """The Python scalar held by a one-element Const, else None."""
    arr = constant_value(graph, ref)
    if arr is None or arr.size != 1 or arr.dtype == object:
        return None
    return arr.reshape(()).item()
