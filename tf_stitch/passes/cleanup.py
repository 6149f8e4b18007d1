"""cleanup: removes what the rewrites leave dangling: the planning marks that `stitch` left on
groups that were not outlined, and colocation constraints (`_class: loc:@name`, which TF1's
`tf.cond` puts on its Switches) naming nodes that are gone, which TensorFlow refuses to import."""

from __future__ import annotations

from tf_stitch.graph.ir import AttrList, Graph
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.stitch import GROUP_ATTR

COLOCATION_ATTR = "_class"
_LOC = b"loc:@"


@graph_pass("cleanup")
def cleanup(graph: Graph, ctx: PassContext) -> Graph:
    """Drops `_stitch_group` attributes and colocations with removed nodes."""
    out = graph.copy()
    for node in out:
        node.attrs.pop(GROUP_ATTR, None)
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
