"""push-slices: slicing the result of an elementwise op = the op on slices of its operands.

(Also: a Slice of a Slice is one Slice, and a Slice moves above a Reshape that only adds or
drops size-1 axes.)

`Slice(a + b)` becomes `Slice(a) + Slice(b)` (an operand that broadcasts along the sliced axis
is not sliced there). Repeated, the slices of an LSTM/GRU gate vector move up to the matmul
outputs they come from, so the gate computation becomes one stitched kernel that reads those
outputs at offsets. An op read by other ops too is pushed through only if it is cheap; it then
stays for the other readers and is recomputed on the slices, once: the slices that recompute
it are not pushed through a second op read by others (a BERT pooler's `x[:, 0]` would
otherwise climb the residual stream of every layer, slicing each layer's statistics, and
recompute the first token's path through all of them).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tf_stitch.fusion.op_kinds import OpKind, op_kind, op_spec
from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder

# One op is pushed per round; a bound on rounds only guards against a rewrite that loops.
_MAX_ROUNDS = 100_000
# An op read by slices and by others is recomputed for the slices if it costs at most this.
_CHEAP_COST = 4


@graph_pass("push-slices")
def push_slices(graph: Graph, ctx: PassContext) -> Graph:
    """Moves constant Slices above the elementwise ops they slice."""
    out = graph.copy()
    recomputing: set[str] = set()  # slices on a path that already recomputes a shared op
    for _ in range(_MAX_ROUNDS):
        if not _one_round(out, recomputing):
            break
    return out


def _one_round(graph: Graph, recomputing: set[str]) -> bool:
    """Makes the first applicable rewrite: compose a Slice of a Slice, move Slices above a
    Reshape that only adds or drops size-1 axes, or above an elementwise op."""
    users = graph.consumers()
    guard = Guard(graph)  # the round rewrites once, after this is read
    for node in list(graph):
        window = _static_slice(graph, node)
        inner = node.inputs[0].node if node.inputs else ""
        if window is not None and _compose(graph, node, window):
            if inner in recomputing:
                recomputing.add(node.name)
            return True
    for node in list(graph):
        if not node.outputs or not guard.removable(node):
            continue
        out_ref = node.output(0)
        readers = [graph.node(u) for u in users.get(out_ref, [])]
        if not readers:
            continue
        slices = [
            r for r in readers if _static_slice(graph, r) is not None and r.inputs[0] == out_ref
        ]
        if not slices:
            continue
        only_slices = len(slices) == len(readers)
        if not only_slices:  # recompute a shared op at most once on a path
            slices = [r for r in slices if r.name not in recomputing]
            if not slices:
                continue
        push: Callable[[Graph, Node, Node], list[str]]
        if op_kind(node.op) is OpKind.ELEMENTWISE and (only_slices or _cheap(node)):
            push = _push
        elif node.op == "Reshape" and only_slices and _unit_axes_only(graph, node):
            push = _push_reshape
        else:
            continue
        for reader in slices:
            created = push(graph, node, reader)
            if not only_slices or reader.name in recomputing:
                recomputing.update(created)
        if only_slices:
            graph.remove([node.name])
        # else: a cheap op read elsewhere too is kept for those readers and recomputed for
        # the slices (XLA duplicates cheap producers the same way)
        return True
    return False


def _cheap(node: Node) -> bool:
    return op_spec(node.op).cost <= _CHEAP_COST


def _compose(graph: Graph, outer: Node, window: tuple[np.ndarray, np.ndarray]) -> bool:
    """Slice(Slice(x, bi, si), bo, so) -> Slice(x, bi + bo, ...)."""
    inner = graph.nodes.get(outer.inputs[0].node)
    if inner is None or outer.inputs[0].index != 0:
        return False
    inner_window = _static_slice(graph, inner)
    if inner_window is None or inner.output(0) in graph.fed():
        return False
    (bi, si), (bo, so) = inner_window, window
    begin = bi + bo
    size = np.where(so != -1, so, np.where(si != -1, si - bo, -1))
    b = NodeBuilder(graph, outer.name + "_composed", outer.device)
    outer.inputs = [
        inner.inputs[0],
        b.const(begin.astype(np.int32), "int32", "begin"),
        b.const(size.astype(np.int32), "int32", "size"),
    ]
    return True


def _static_slice(graph: Graph, node: Node) -> tuple[np.ndarray, np.ndarray] | None:
    if node.op != "Slice" or node.control_inputs:
        return None
    begin, size = constant_value(graph, node.inputs[1]), constant_value(graph, node.inputs[2])
    if begin is None or size is None:
        return None
    return begin.astype(np.int64), size.astype(np.int64)


def _push(graph: Graph, op: Node, reader: Node) -> list[str]:
    """Replaces `reader` = Slice(op(...)) by op(Slice(operand), ...) under reader's name;
    returns the new Slices."""
    begin, size = _static_slice(graph, reader)  # type: ignore[misc]
    out_shape = op.outputs[0].shape or ()
    b = NodeBuilder(graph, reader.name + "_pushed", reader.device)
    operands = [_slice_operand(graph, b, ref, begin, size, len(out_shape)) for ref in op.inputs]
    graph.remove([reader.name])
    graph.add(
        Node(reader.name, op.op, operands, dict(op.attrs), list(reader.outputs), device=op.device)
    )
    return [r.node for r in operands if r not in op.inputs]


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


def _unit_axes_only(graph: Graph, node: Node) -> bool:
    """A Reshape that only inserts or removes axes of size 1."""
    src, out = graph.info(node.inputs[0]).shape, node.outputs[0].shape
    if src is None or out is None:
        return False
    return [d for d in src if d != 1] == [d for d in out if d != 1] and (
        sum(d is None for d in out) <= 1
    )


def _push_reshape(graph: Graph, reshape: Node, reader: Node) -> list[str]:
    """Slice(Reshape(y)) -> Reshape(Slice(y)) for a Reshape of size-1 axes only; returns the
    new Slice."""
    begin, size = _static_slice(graph, reader)  # type: ignore[misc]
    src_shape = graph.info(reshape.inputs[0]).shape or ()
    out_shape = reshape.outputs[0].shape or ()
    kept = [i for i, d in enumerate(out_shape) if d != 1]
    src_kept = [i for i, d in enumerate(src_shape) if d != 1]
    src_begin = np.zeros(len(src_shape), np.int64)
    src_size = np.full(len(src_shape), -1, np.int64)
    for o, i in zip(kept, src_kept, strict=True):
        src_begin[i], src_size[i] = begin[o], size[o]
    sliced_dims = tuple(d if s == -1 else int(s) for d, s in zip(src_shape, src_size, strict=True))
    info = graph.info(reshape.inputs[0])
    b = NodeBuilder(graph, reader.name + "_pushed", reader.device)
    piece = b.op(
        "Slice",
        [
            reshape.inputs[0],
            b.const(src_begin.astype(np.int32), "int32", "begin"),
            b.const(src_size.astype(np.int32), "int32", "size"),
        ],
        TensorInfo(info.dtype, sliced_dims),
        {"T": DType(info.dtype), "Index": DType("int32")},
        base="slice",
    )
    target = [-1 if d is None else d for d in reader.outputs[0].shape or ()]
    shape_ref = b.const(np.asarray(target, np.int32), "int32", "shape")
    graph.remove([reader.name])
    graph.add(
        Node(
            reader.name,
            "Reshape",
            [piece, shape_ref],
            {"T": DType(info.dtype), "Tshape": DType("int32")},
            list(reader.outputs),
            device=reshape.device,
        )
    )
    return [piece.node]
