"""pack-views: a Transpose or ReverseV2 of a Pack becomes a Pack.

An unrolled recurrent layer stacks its per-step outputs time-major and transposes them to
batch-major (`Transpose(Pack(h_0..h_T-1), [1, 0, 2])`); a backward layer also reverses time.
Packing along the final axis, in the final order, gives the same tensor with one copy instead
of two or three.
"""

from __future__ import annotations

from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import Graph, Node
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.patterns import ANY, OpPattern, find_all

_VIEW_OF_PACK = OpPattern("Transpose|ReverseV2", inputs=(OpPattern("Pack", name="pack"), ANY))


@graph_pass("pack-views")
def pack_views(graph: Graph, ctx: PassContext) -> Graph:
    """Folds Transposes that only move a Pack's axis, and ReverseV2s along it, into the Pack."""
    out = graph.copy()
    changed = True
    while changed:  # a Reverse of a Transpose of a Pack folds in two rounds
        changed = False
        consumers = out.consumers()
        guard = Guard(out)
        for m in find_all(out, _VIEW_OF_PACK):
            node, pack = m.root, m.bound["pack"]
            if not (guard.rewritable(node) and guard.removable(pack)):
                continue
            if consumers.get(pack.output(0), []) != [node.name]:
                continue
            folded = _fold(out, node, pack)
            if folded is not None:
                out.nodes[node.name] = folded
                out.remove([pack.name])
                changed = True
                break
    return out


def _fold(graph: Graph, node: Node, pack: Node) -> Node | None:
    rank = len(pack.outputs[0].shape or ())
    if not rank:
        return None
    axis = int(pack.attrs.get("axis", 0)) % rank
    values = list(pack.inputs)
    arg = constant_value(graph, node.inputs[1])
    if arg is None:
        return None
    if node.op == "Transpose":
        perm = [int(p) for p in arg.reshape(-1)]
        rest = [p for p in perm if p != axis]
        if sorted(perm) != list(range(rank)) or rest != sorted(rest):
            return None  # the transpose also reorders the other axes
        axis = perm.index(axis)
    else:
        axes = {int(a) % rank for a in arg.reshape(-1)}
        if axes != {axis}:
            return None
        values.reverse()
    attrs = {**pack.attrs, "axis": axis}
    return Node(node.name, "Pack", values, attrs, list(node.outputs), device=node.device)
