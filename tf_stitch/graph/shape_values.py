"""Partial values of small integer tensors that describe shapes (Shape, Gather, Pack, ...).

`partial_value(graph, ref)` gives a 1-D tensor's elements (None where unknown), or a scalar's
value, for the shape arithmetic Keras and tf.tensordot build when a size is only known at run
time. Anything it does not understand is None.
"""

from __future__ import annotations

import math

from tf_stitch.graph.ir import Graph, TensorRef
from tf_stitch.graph.values import constant_value

Partial = list[int | None] | int | None


def partial_value(graph: Graph, ref: TensorRef, depth: int = 0) -> Partial:
    if depth > 32:
        return None
    node = graph.nodes.get(ref.node)
    if node is None:
        return None
    const = constant_value(graph, ref)
    if const is not None:
        if const.dtype.kind not in "iu" or const.ndim > 1:
            return None
        return int(const) if const.ndim == 0 else [int(v) for v in const]

    def sub(i: int) -> Partial:
        return partial_value(graph, node.inputs[i], depth + 1)

    op = node.op
    if op == "Shape":
        shape = graph.info(node.inputs[0]).shape
        return None if shape is None else list(shape)
    if op in ("Identity", "Cast"):
        return sub(0)
    if op == "GatherV2":
        return _gather(sub(0), constant_value(graph, node.inputs[1]), sub(2))
    if op == "ConcatV2":
        parts = [sub(i) for i in range(len(node.inputs) - 1)]
        if all(isinstance(p, list) for p in parts):
            return [d for p in parts for d in p]  # type: ignore[union-attr]
        return None
    if op == "Pack" and node.attrs.get("axis", 0) == 0:
        items = [sub(i) for i in range(len(node.inputs))]
        if all(i is None or isinstance(i, int) for i in items):
            return items  # type: ignore[return-value]
        return None
    if op == "Slice":
        return _slice(
            sub(0), constant_value(graph, node.inputs[1]), constant_value(graph, node.inputs[2])
        )
    if op in ("Squeeze", "Reshape", "ExpandDims"):
        return _reshaped(sub(0), node.outputs[0].shape)
    if op in ("Prod", "Sum") and not node.attrs.get("keep_dims", False):
        values = sub(0)
        if isinstance(values, list) and None not in values:
            return math.prod(values) if op == "Prod" else sum(values)  # type: ignore[arg-type]
        return None
    return None


def _slice(values: Partial, begin: object, size: object) -> Partial:
    """A window of a 1-D shape value (Slice with constant bounds)."""
    if not isinstance(values, list) or begin is None or size is None:
        return None
    import numpy as np

    b, n = np.asarray(begin).reshape(-1), np.asarray(size).reshape(-1)
    if len(b) != 1 or len(n) != 1:
        return None
    start = int(b[0])
    stop = len(values) if int(n[0]) == -1 else start + int(n[0])
    if not 0 <= start <= stop <= len(values):
        return None  # TensorFlow rejects it at run time
    return values[start:stop]


def _reshaped(values: Partial, shape: tuple[int | None, ...] | None) -> Partial:
    """A shape value viewed as a scalar or a vector (Squeeze, Reshape, ExpandDims)."""
    if shape == ():
        if isinstance(values, list) and len(values) == 1:
            return values[0]
        return values if isinstance(values, int) else None
    if shape is not None and len(shape) == 1:
        if isinstance(values, int):
            return [values] if shape[0] == 1 else None
        if isinstance(values, list) and shape[0] in (None, len(values)):
            return values
    return None


def _gather(params: Partial, indices: object, axis: Partial) -> Partial:
    if not isinstance(params, list) or axis != 0 or indices is None:
        return None
    import numpy as np

    idx = np.asarray(indices)
    # GatherV2 rejects negative indices at run time, so they have no value here.
    if idx.ndim > 1 or any(not 0 <= int(i) < len(params) for i in idx.reshape(-1)):
        return None
    if idx.ndim == 0:
        return params[int(idx)]
    return [params[int(i)] for i in idx]
