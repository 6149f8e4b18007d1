"""view-copies: a slice read by several stitchable ops gets one copy per reader.

A recurrent cell slices its gates out of one matmul's result (`z = gates[:, :64]`), and the
step's update and, in training, its gradient both read each slice. A Slice is a view: inside a
kernel it is an offset into its input and costs nothing. But a Slice read by two kernels could
only join one of them as an output, which a kernel would merely copy, so the planner leaves it
to TensorFlow: one launch per gate and step (DIEN's training step had 90).

Here each reader the fuser could take in gets a Slice of its own (the readers it cannot, such
as a library matmul, share the original), so every copy joins its reader's kernel as a view.
Runs right before planning: common-subexpression elimination would merge the copies again.
`rejoin-view-copies`, after outlining, makes the copies that joined no kernel one Slice again,
so a reader left to TensorFlow never costs a launch more than the shared view did.
"""

from __future__ import annotations

from tf_stitch.fusion.op_kinds import FUSIBLE_DTYPES, OpKind, op_kind
from tf_stitch.fusion.static_args import slice_window
from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import INT_DTYPES, Graph, Node, TensorRef
from tf_stitch.passes.base import PassContext, graph_pass

_READERS = (OpKind.ELEMENTWISE, OpKind.BROADCAST, OpKind.REDUCE)


@graph_pass("view-copies")
def view_copies(graph: Graph, ctx: PassContext) -> Graph:
    """Gives each stitchable reader of a multiply-read constant-window Slice its own copy."""
    out = graph.copy()
    guard = Guard(out)
    consumers = out.consumers()
    for node in list(out):
        if node.op != "Slice" or not guard.removable(node) or slice_window(out, node) is None:
            continue
        dtype = node.outputs[0].dtype
        if dtype not in FUSIBLE_DTYPES or dtype in INT_DTYPES:
            continue  # integer indices: a gather's kernel reads them through its own pattern
        readers = list(dict.fromkeys(consumers.get(node.output(0), [])))
        own = [r for r in readers if op_kind(out.node(r).op) in _READERS]
        if len(readers) < 2 or not own:
            continue
        # the original stays with the readers the fuser cannot take in, or the first one
        shared = len(own) < len(readers)
        for reader in own[0 if shared else 1 :]:
            _give_copy(out, node, out.node(reader))
    return out


def _give_copy(graph: Graph, view: Node, reader: Node) -> None:
    copy = view.copy()
    copy.name = graph.unique_name(f"{view.name}/for_{reader.name.rsplit('/', 1)[-1]}")
    graph.add(copy)
    reader.inputs = [TensorRef(copy.name, 0) if r == view.output(0) else r for r in reader.inputs]


@graph_pass("rejoin-view-copies")
def rejoin_view_copies(graph: Graph, ctx: PassContext) -> Graph:
    """Slices of the same window of the same tensor that are still TensorFlow ops -> one."""
    out = graph.copy()
    guard = Guard(out)
    first: dict[tuple[object, ...], str] = {}
    for node in list(out):
        if node.op != "Slice" or not guard.removable(node):
            continue
        attrs = tuple(sorted((k, repr(v)) for k, v in node.attrs.items()))
        key = (tuple(node.inputs), attrs, node.device)
        if key not in first:
            first[key] = node.name
            continue
        out.replace_uses(node.output(0), TensorRef(first[key], 0))
        out.remove([node.name])
    return out
