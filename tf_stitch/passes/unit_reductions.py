"""unit-reductions: a reduction over axes of size 1 only is a Reshape.

A Keras loss averages over the batch by dividing by `Prod(Pack([batch]))`: a product over one
element, which is that element. On integers the fuser leaves such a reduction to TensorFlow, one
op a step for nothing (a training step of every Keras model with a mean loss); on floats it costs
a place in a kernel. Reducing only axes of size 1, or none (Sum, Prod, Max, Min, Mean, All,
Any), gives the input unchanged, NaNs included, in every dtype: it becomes a Reshape to its own
output shape, a view TensorFlow runs without a kernel and the fuser sees through.
"""

from __future__ import annotations

from tf_stitch.fusion.static_args import reduction_axes
from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import DType, Graph, Node
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import replace_with_reshape

REDUCTIONS = frozenset({"Sum", "Prod", "Max", "Min", "Mean", "All", "Any"})


@graph_pass("unit-reductions")
def unit_reductions(graph: Graph, ctx: PassContext) -> Graph:
    """Rewrites reductions over size-1 axes only as Reshapes."""
    out = graph.copy()
    guard = Guard(out)
    for node in list(out):
        if node.op in REDUCTIONS and guard.rewritable(node) and _over_ones(out, node):
            if "T" not in node.attrs:  # All, Any
                node.attrs["T"] = DType(node.outputs[0].dtype)
            replace_with_reshape(out, node)
    return out


def _over_ones(graph: Graph, node: Node) -> bool:
    shape = graph.info(node.inputs[0]).shape
    axes = reduction_axes(graph, node)
    if shape is None or axes is None or len(node.outputs) != 1:
        return False
    return all(shape[a] == 1 for a in axes)
