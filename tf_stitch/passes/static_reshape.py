"""static-reshape: a Reshape whose target is computed at run time gets a constant target.

Keras builds `Reshape(x, Pack(Prod(GatherV2(Shape(x)))...))` when the batch size is unknown.
TensorFlow's shape inference already knows the result up to one unknown size, so the target can
be the constant shape with -1 in that place; the shape arithmetic then becomes dead.
"""

from __future__ import annotations

import numpy as np

from tf_stitch.graph.io import infer_shapes
from tf_stitch.graph.ir import DType, Graph, Node, TensorRef
from tf_stitch.graph.shape_values import partial_value
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder

_MAX_ROUNDS = 8


@graph_pass("static-reshape")
def static_reshape(graph: Graph, ctx: PassContext) -> Graph:
    """Gives Reshapes with a dynamic target a constant one when at most one size is unknown.

    A constant target sharpens the shapes after it, which may make a later target known, so
    this repeats (with shape inference in between) until nothing changes."""
    for _ in range(_MAX_ROUNDS):
        out, changed = _one_round(graph)
        if not changed:
            return out
        graph = infer_shapes(out)
    return graph


def _one_round(graph: Graph) -> tuple[Graph, bool]:
    out = graph.copy()
    changed = False
    fed = out.fed()
    for node in list(out):
        if node.op != "Reshape" or constant_value(out, node.inputs[1]) is not None:
            continue
        if node.inputs[1] in fed:  # the target is whatever is fed, not what inference saw
            continue
        shape = _target(out, node)
        if shape is None or sum(d is None for d in shape) > 1 or 0 in shape:
            continue
        target = np.asarray([-1 if d is None else d for d in shape], dtype=np.int32)
        builder = NodeBuilder(out, node.name, node.device)
        const = builder.const(target, "int32", base="static_shape")
        node.inputs = [node.inputs[0], TensorRef(const.node, 0)]
        node.attrs["Tshape"] = DType("int32")
        changed = True
    return out, changed


def _target(graph: Graph, node: Node) -> list[int | None] | None:
    """The target shape as far as it is known: from shape inference, refined by evaluating the
    shape arithmetic that computes it."""
    inferred = node.outputs[0].shape
    computed = partial_value(graph, node.inputs[1])
    if inferred is None:
        return computed if isinstance(computed, list) else None
    if not isinstance(computed, list) or len(computed) != len(inferred):
        return list(inferred)
    merged = []
    for a, b in zip(inferred, computed, strict=True):
        if a is not None and b is not None and b >= 0 and a != b:
            return None  # shape inference and the arithmetic disagree: leave it alone
        merged.append(a if a is not None else (b if b is not None and b >= 0 else None))
    return merged
