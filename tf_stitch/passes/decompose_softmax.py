"""decompose-softmax: Softmax and LogSoftmax become the primitive ops they compute.

softmax(x) = e / sum(e) with e = exp(x - max(x)); log_softmax(x) = (x - max(x)) - log(sum(e)),
all along the last axis, which is what TensorFlow's kernels compute. The last op keeps the
original node's name, so readers and fetches are unchanged. The ops are of the node's dtype
(float32, float16, bfloat16 or float64; a kernel computes the 16-bit ones in float32).
"""

from __future__ import annotations

from tf_stitch.fusion.op_kinds import FLOAT_DTYPES
from tf_stitch.graph.ir import Graph, Node
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder, keepdims_shape
from tf_stitch.passes.decompose_common import decompose_each, replace_with


@graph_pass("decompose-softmax")
def decompose_softmax(graph: Graph, ctx: PassContext) -> Graph:
    """Rewrites Softmax/LogSoftmax into max, sub, exp, sum and div/log."""
    softmaxes = ("Softmax", "LogSoftmax")
    return decompose_each(graph, lambda node: node.op in softmaxes, _rewrite, FLOAT_DTYPES)


def _rewrite(graph: Graph, node: Node) -> None:
    shape = node.outputs[0].shape
    assert shape is not None
    axis = len(shape) - 1
    b = NodeBuilder(graph, node.name + "_decomposed", node.device)
    x = node.inputs[0]
    row = keepdims_shape(shape, [axis])
    t = node.outputs[0].dtype

    def build(name: str) -> None:
        m = b.reduce("Max", x, [axis], row, dtype=t)
        shifted = b.binary("Sub", x, m, shape, dtype=t)
        e = b.unary("Exp", shifted, shape, dtype=t)
        z = b.reduce("Sum", e, [axis], row, dtype=t)
        if node.op == "Softmax":
            b.binary("RealDiv", e, z, shape, dtype=t, name=name)
        else:
            b.binary("Sub", shifted, b.unary("Log", z, row, dtype=t), shape, dtype=t, name=name)

    replace_with(graph, node, build)
