"""batched-weight-grads: a weight's gradient summed over a batched matmul's batch is one MatMul
of the batch's rows stacked.

A weight a batched matmul applies to every item of a batch (Keras' `EinsumDense`: a multi-head
attention's query, key, value and output projections, `BatchMatMulV2(x, W)` with x [batch, T,
D] and W [D, H] broadcast over the batch) has for gradient `Sum(BatchMatMulV2(x, dy,
adj_x=True), batch axes)`: a batched GEMM writing one [D, H] per item, then a reduction of them
that no GEMM epilogue does (one kernel more per weight). Summing over the items is summing
over more rows:

    dW = MatMul(Reshape(x, [-1, D]), Reshape(dy, [-1, H]), transpose_a=True)

one GEMM; the reshapes are views. Only where both operands have the same batch and row sizes
(known, or unknown and proven equal by `SymbolicDims(proven=True)`): an operand broadcast
along the batch is summed once per item by the batched GEMM, which stacking rows would not do.
The sum is the same up to the order of float additions, as the GEMM's own blocking orders them.
"""

from __future__ import annotations

import numpy as np

from tf_stitch.fusion.static_args import reduction_axes
from tf_stitch.fusion.symbolic_dims import SymbolicDims
from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder
from tf_stitch.passes.decompose_common import replace_with

BATCH_MATMULS = ("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")


@graph_pass("batched-weight-grads")
def batched_weight_grads(graph: Graph, ctx: PassContext) -> Graph:
    """Replaces Sums over a batched `x^T dy`'s batch axes by one MatMul of the rows stacked."""
    guard = Guard(graph)
    sums = [n for n in graph if n.op == "Sum" and guard.rewritable(n)]
    if not any(_product(graph, n) is not None for n in sums):
        return graph
    out = graph.copy()
    dims = SymbolicDims(out, proven=True)
    readers = out.consumers()
    for node in sums:
        product = _product(out, node)
        if product is None or not guard.removable(product):
            continue
        if readers.get(product.output(0), []) != [node.name]:
            continue  # the batched product is needed as it is anyway
        a, b = product.inputs[:2]
        if _rows_alike(out, dims, a, b):
            _rewrite(out, node, a, b)
            out.remove([product.name])  # the Sum was its one reader
    return out


def _product(graph: Graph, node: Node) -> Node | None:
    """The batched `x^T dy` a Sum reduces over every batch axis of, without keeping them."""
    if node.op != "Sum" or node.attrs.get("keep_dims") or node.outputs[0].dtype != "float32":
        return None
    source = graph.nodes.get(node.inputs[0].node)
    if source is None or source.op not in BATCH_MATMULS or node.inputs[0].index != 0:
        return None
    if not source.attrs.get("adj_x") or source.attrs.get("adj_y"):
        return None
    rank = graph.info(node.inputs[0]).rank
    if rank is None or rank < 3 or reduction_axes(graph, node) != tuple(range(rank - 2)):
        return None
    return source


def _rows_alike(graph: Graph, dims: SymbolicDims, a: TensorRef, b: TensorRef) -> bool:
    """Whether `a` [..., T, D] and `b` [..., T, H] have the same sizes but the last (D and H
    known), so that the batched product pairs item i of one with item i of the other."""
    sa, sb = graph.info(a).shape, graph.info(b).shape
    if sa is None or sb is None or len(sa) != len(sb) or sa[-1] is None or sb[-1] is None:
        return False
    for axis in range(len(sa) - 1):
        x, y = sa[axis], sb[axis]
        if x is None and y is None:
            if dims.symbol(a, axis) != dims.symbol(b, axis):
                return False
        elif x != y:
            return False
    return True


def _rewrite(graph: Graph, node: Node, a: TensorRef, b: TensorRef) -> None:
    sa, sb = graph.info(a).shape, graph.info(b).shape
    assert sa is not None and sb is not None and sa[-1] is not None and sb[-1] is not None
    d, h = sa[-1], sb[-1]
    b_ = NodeBuilder(graph, node.name, node.device)

    def rows(ref: TensorRef, width: int) -> TensorRef:
        target = b_.const(np.asarray([-1, width], np.int32), "int32", base="rows_shape")
        attrs = {"T": DType("float32"), "Tshape": DType("int32")}
        return b_.op("Reshape", [ref, target], TensorInfo("float32", (None, width)), attrs)

    def build(name: str) -> None:
        attrs = {"T": DType("float32"), "transpose_a": True, "transpose_b": False}
        ins = [rows(a, d), rows(b, h)]
        b_.op("MatMul", ins, TensorInfo("float32", (d, h)), attrs, name=name)

    replace_with(graph, node, build)
