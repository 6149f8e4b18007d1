"""forward-identities: readers of an Identity-like node (or an identity Transpose) read its
input instead; readers of an `IdentityN` (Keras' custom-gradient activations such as swish
wrap their result in one) read the matching input."""

from __future__ import annotations

import numpy as np

from tf_stitch.graph.ir import Graph, Node
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass

IDENTITY_OPS = frozenset({"Identity", "StopGradient", "Snapshot", "PreventGradient"})


@graph_pass("forward-identities")
def forward_identities(graph: Graph, ctx: PassContext) -> Graph:
    """Removes Identity/StopGradient/Snapshot nodes that are not fed, fetched or ordered."""
    out = graph.copy()
    keep = {r.node for r in out.inputs} | {r.node for r in out.outputs} | set(out.targets)
    control_sources = out.control_consumers()
    for node in list(out):
        if (
            not _is_identity(out, node)
            or node.control_inputs
            or node.name in keep
            or node.name in control_sources
            or out.node(node.inputs[0].node).device != node.device
        ):
            continue
        for i in range(len(node.outputs) if node.op == "IdentityN" else 1):
            out.replace_uses(node.output(i), node.inputs[i])
        # (the permutation constant of an identity Transpose is pruned later)
        out.remove([node.name])
    return out


def _is_identity(graph: Graph, node: Node) -> bool:
    if node.op in IDENTITY_OPS:
        return len(node.inputs) == 1
    if node.op == "IdentityN":
        return len(node.inputs) == len(node.outputs) > 0
    if node.op == "Transpose" and node.inputs[1] not in graph.fed():
        perm = constant_value(graph, node.inputs[1])
        return perm is not None and perm.ndim == 1 and bool(np.all(perm == np.arange(perm.size)))
    return False
