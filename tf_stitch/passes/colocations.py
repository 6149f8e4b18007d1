"""dangling_colocations: drops the colocation constraints (`_class: loc:@name`, which TF1's
`tf.cond` puts on its Switches) that name nodes the rewrites removed: TensorFlow refuses to
import a graph with one."""

from __future__ import annotations

from tf_stitch.graph.ir import AttrList, Graph
from tf_stitch.passes.base import PassContext, graph_pass

COLOCATION_ATTR = "_class"
_LOC = b"loc:@"


@graph_pass("dangling_colocations")
def drop_dangling_colocations(graph: Graph, ctx: PassContext) -> Graph:
    """Drops colocations with removed nodes."""
    out = graph.copy()
    for node in out:
        classes = node.attrs.get(COLOCATION_ATTR)
        if not isinstance(classes, AttrList):
            continue
        kept = tuple(c for c in classes.items if not _names_a_removed_node(c, out))
        if not kept:
            del node.attrs[COLOCATION_ATTR]
        elif kept != classes.items:
            node.attrs[COLOCATION_ATTR] = AttrList(classes.kind, kept)
    return out


def _names_a_removed_node(entry: object, graph: Graph) -> bool:
    text = entry if isinstance(entry, bytes) else str(entry).encode()
    return text.startswith(_LOC) and text[len(_LOC) :].decode(errors="replace") not in graph
