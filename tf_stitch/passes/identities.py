"""forward-identities: readers of an Identity-like node (or an identity Transpose) read its
input instead; readers of an `IdentityN` (Keras' custom-gradient activations such as swish
wrap their result in one) read the matching input."""

from __future__ import annotations

import numpy as np

from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import Graph, Node, TensorRef
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass

IDENTITY_OPS = frozenset({"Identity", "StopGradient", "Snapshot", "PreventGradient"})


@graph_pass("forward-identities")
def forward_identities(graph: Graph, ctx: PassContext) -> Graph:
    """Removes Identity/StopGradient/Snapshot nodes that are not fed, fetched or ordered."""
    out = graph.copy()
    guard = Guard(out)
    forward: dict[TensorRef, TensorRef] = {}  # an identity's output -> what it forwards

    def source(ref: TensorRef) -> TensorRef:
        while ref in forward:
            ref = forward[ref]
        return ref

    removed = []
    for node in out:
        if (
            not _is_identity(out, guard, node)
            or not guard.removable(node)
            or out.node(source(node.inputs[0]).node).device != node.device
        ):
            continue
        for i in range(len(node.outputs) if node.op == "IdentityN" else 1):
            forward[node.output(i)] = node.inputs[i]
        removed.append(node.name)
    # every reader rewired in one sweep (one replace_uses per identity scanned the whole graph)
    for node in out:
        if any(r in forward for r in node.inputs):
            node.inputs = [source(r) for r in node.inputs]
    out.outputs = [source(r) for r in out.outputs]
    # (the permutation constant of an identity Transpose is pruned later)
    out.remove(removed)
    return out


def _is_identity(graph: Graph, guard: Guard, node: Node) -> bool:
    if node.op in IDENTITY_OPS:
        return len(node.inputs) == 1
    if node.op == "IdentityN":
        return len(node.inputs) == len(node.outputs) > 0
    if node.op == "Transpose" and node.inputs[1].node not in guard.fed:
        perm = constant_value(graph, node.inputs[1])
        return perm is not None and perm.ndim == 1 and bool(np.all(perm == np.arange(perm.size)))
    return False
