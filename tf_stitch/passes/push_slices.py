"""push-slices: slicing the result of an elementwise op = the op on slices of its operands.

`Slice(a + b)` becomes `Slice(a) + Slice(b)` (an operand that broadcasts along the sliced axis
is not sliced there). Repeated, the slices of an LSTM/GRU gate vector move up to the matmul
outputs they come from, so the gate computation becomes one stitched kernel that reads those
outputs at offsets. An op is pushed through only if every reader of it is such a Slice.
"""

from __future__ import annotations

import numpy as np

from tf_stitch.fusion.op_kinds import OpKind, op_kind
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder

_MAX_ROUNDS = 16


@graph_pass("push-slices")
def push_slices(graph: Graph, ctx: PassContext) -> Graph:
    """Moves constant Slices above the elementwise ops they slice."""
    out = graph.copy()
    for _ in range(_MAX_ROUNDS):
        if not _one_round(out):
            break
    return out


def _one_round(graph: Graph) -> bool:
    users = graph.consumers()
    keep = graph.fed() | graph.fetched()
    for node in list(graph):
        if op_kind(node.op) is not OpKind.ELEMENTWISE or node.control_inputs:
            continue
        out_ref = node.output(0)
        readers = [graph.node(u) for u in users.get(out_ref, [])]
        if not readers or out_ref in keep or node.name in graph.control_consumers():
            continue
        if not all(_static_slice(graph, r) is not None and r.inputs[0] == out_ref for r in readers):
            continue
        for reader in readers:
            _push(graph, node, reader)
        graph.remove([node.name])
        return True
    return False


def _static_slice(graph: Graph, node: Node) -> tuple[np.ndarray, np.ndarray] | None:
    if node.op != "Slice" or node.control_inputs:
        return None
    begin, size = constant_value(graph, node.inputs[1]), constant_value(graph, node.inputs[2])
    if begin is None or size is None:
        return None
    return begin.astype(np.int64), size.astype(np.int64)


def _push(graph: Graph, op: Node, reader: Node) -> None:
    """Replaces `reader` = Slice(op(...)) by op(Slice(operand), ...) under reader's name."""
    begin, size = _static_slice(graph, reader)  # type: ignore[misc]
    out_shape = op.outputs[0].shape or ()
    b = NodeBuilder(graph, reader.name + "_pushed", reader.device)
    operands = [_slice_operand(graph, b, ref, begin, size, len(out_shape)) for ref in op.inputs]
    graph.remove([reader.name])
    graph.add(
        Node(reader.name, op.op, operands, dict(op.attrs), list(reader.outputs), device=op.device)
    )


def _slice_operand(
    graph: Graph, b: NodeBuilder, ref: TensorRef, begin: np.ndarray, size: np.ndarray, rank: int
) -> TensorRef:
    shape = graph.info(ref).shape or ()
    lead = rank - len(shape)  # numpy broadcasting aligns operands to the right
    b_op, s_op = begin[lead:].copy(), size[lead:].copy()
    for i, d in enumerate(shape):
        if d == 1:  # broadcast along this axis: the whole (single) element
            b_op[i], s_op[i] = 0, -1
    if np.all(b_op == 0) and np.all(s_op == -1):
        return ref
    dims = tuple(d if s == -1 else int(s) for d, s in zip(shape, s_op, strict=True))
    info = graph.info(ref)
    return b.op(
        "Slice",
        [
            ref,
            b.const(b_op.astype(np.int32), "int32", "begin"),
            b.const(s_op.astype(np.int32), "int32", "size"),
        ],
        TensorInfo(info.dtype, dims),
        {"T": DType(info.dtype), "Index": DType("int32")},
        base="slice",
    )
