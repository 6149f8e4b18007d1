"""decompose-softmax: Softmax and LogSoftmax become the primitive ops they compute.

softmax(x) = e / sum(e) with e = exp(x - max(x)); log_softmax(x) = (x - max(x)) - log(sum(e)),
all along the last axis, which is what TensorFlow's kernels compute. The last op keeps the
original node's name, so readers and fetches are unchanged.
"""

from __future__ import annotations

from tf_stitch.graph.ir import Graph, Node
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder, keepdims_shape
from tf_stitch.passes.decompose_common import decompose_each, replace_with


@graph_pass("decompose-softmax")
def decompose_softmax(graph: Graph, ctx: PassContext) -> Graph:
    """Rewrites float32 Softmax/LogSoftmax into max, sub, exp, sum and div/log."""
    return decompose_each(graph, lambda node: node.op in ("Softmax", "LogSoftmax"), _rewrite)


def _rewrite(graph: Graph, node: Node) -> None:
    shape = node.outputs[0].shape
    assert shape is not None
    axis = len(shape) - 1
    b = NodeBuilder(graph, node.name + "_decomposed", node.device)
    x = node.inputs[0]
    row = keepdims_shape(shape, [axis])

    def build(name: str) -> None:
        m = b.reduce("Max", x, [axis], row)
        shifted = b.binary("Sub", x, m, shape)
        e = b.unary("Exp", shifted, shape)
        z = b.reduce("Sum", e, [axis], row)
        if node.op == "Softmax":
            b.binary("RealDiv", e, z, shape, name=name)
        else:
            b.binary("Sub", shifted, b.unary("Log", z, row), shape, name=name)

    replace_with(graph, node, build)
