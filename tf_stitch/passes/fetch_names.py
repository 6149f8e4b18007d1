"""fetch-names: every requested output is there afterwards under its own name and index.

Passes replace nodes (a Split by one Slice per piece, a group by a kernel); where that moved a
fetched tensor, a node named like the original reads its new producer: an Identity for output 0,
an IdentityN where outputs 1, 2, ... of a multi-output node were fetched. Neither launches a
kernel.
"""

from __future__ import annotations

from tf_stitch.graph.ir import AttrList, DType, Graph, Node, TensorRef
from tf_stitch.passes.base import PassContext, graph_pass


@graph_pass("fetch-names")
def keep_fetch_names(graph: Graph, ctx: PassContext) -> Graph:
    """Gives every fetch that a pass renamed its requested name back."""
    wanted = ctx.requested_outputs
    if not wanted or graph.outputs == wanted or len(wanted) != len(graph.outputs):
        return graph  # (optimize's validation reports a changed number of outputs)
    moved: dict[str, dict[int, TensorRef]] = {}
    for want, have in zip(wanted, graph.outputs, strict=True):
        if want != have:
            moved.setdefault(want.node, {})[want.index] = have
    out = graph.copy()
    restored = set()
    for name, by_index in moved.items():
        if name in out:
            continue  # the name now means something else: validation refuses the graph
        out.add(_reader(out, name, by_index))
        restored.add(name)
    out.outputs = [
        want if want.node in restored else have
        for want, have in zip(wanted, out.outputs, strict=True)
    ]
    return out


def _reader(graph: Graph, name: str, by_index: dict[int, TensorRef]) -> Node:
    """A node named `name` whose output i is `by_index[i]` (other outputs are unused)."""
    device = graph.node(next(iter(by_index.values())).node).device
    if set(by_index) == {0}:
        ref = by_index[0]
        info = graph.info(ref)
        return Node(name, "Identity", [ref], {"T": DType(info.dtype)}, [info], device=device)
    first = next(iter(by_index.values()))
    refs = [by_index.get(i, first) for i in range(max(by_index) + 1)]
    infos = [graph.info(r) for r in refs]
    types = AttrList("type", tuple(DType(i.dtype) for i in infos))
    return Node(name, "IdentityN", refs, {"T": types}, infos, device=device)
