"""sibling-calls: library calls of one input by slices that tile one filter become one call.

Keras' ConvLSTM2D cell splits its kernel into the four gates' filters and convolves the frame
with each (`conv(x, W[..., 0:16])`, ..., `conv(x, W[..., 48:64])`), and its recurrent kernel
with the state likewise: eight convolutions and eight filter copies a time step. Output channels
are independent, so those four are one convolution by the whole filter, each gate a slice of
its output's last axis (`Slice(conv(x, W), [0, 0, 0, 16 g], [-1, -1, -1, 16])`), which a stitched
kernel reads in place. The same holds for MatMuls by column slices of one matrix. Only slices
that together cover the filter's last axis exactly are merged (no product is computed that
was not asked for), and only calls with the same input and attributes.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder
from tf_stitch.passes.decompose_common import channels_first

# Calls whose output's last axis is their filter's (right operand's) last axis (see `_plain`).
_CALLS = frozenset({"Conv2D", "MatMul"})


@graph_pass("sibling-calls")
def sibling_calls(graph: Graph, ctx: PassContext) -> Graph:
    """Merges calls of one input by slices tiling one filter's last axis into one call."""
    out = graph.copy()
    guard = Guard(out)
    families: dict[tuple[str, TensorRef, TensorRef, str], list[tuple[Node, int, int]]]
    families = defaultdict(list)
    for node in out:
        if node.op not in _CALLS or not guard.removable(node) or not _plain(node):
            continue
        piece = _last_axis_piece(out, node.inputs[1])
        if piece is None:
            continue
        whole, begin, size = piece
        attrs = repr(sorted((k, repr(v)) for k, v in node.attrs.items()))
        families[(node.op, node.inputs[0], whole, attrs)].append((node, begin, size))
    for (_, _, whole, _), calls in families.items():
        if len(calls) >= 2 and calls[0][0].outputs[0].shape and _tiles(out, whole, calls):
            _merge(out, whole, sorted(calls, key=lambda c: c[1]))
    return out


def _plain(node: Node) -> bool:
    """A call whose output's last axis is its filter's: NHWC convolutions, MatMuls without a
    transposed right operand."""
    if node.op == "MatMul":
        return not node.attrs.get("transpose_b") and not node.attrs.get("transpose_a")
    return not channels_first(node)


def _last_axis_piece(graph: Graph, ref: TensorRef) -> tuple[TensorRef, int, int] | None:
    """(the sliced tensor, begin, size) if `ref` is a Slice of a range of its input's last
    axis (every other axis whole), else None."""
    node = graph.nodes.get(ref.node)
    if node is None or node.op != "Slice" or node.control_inputs:
        return None
    shape = graph.info(node.inputs[0]).shape
    begin, size = constant_value(graph, node.inputs[1]), constant_value(graph, node.inputs[2])
    if shape is None or begin is None or size is None or len(begin) != len(shape):
        return None
    last = len(shape) - 1
    for axis in range(last):
        if int(begin[axis]) != 0 or int(size[axis]) not in (-1, shape[axis] or -1):
            return None
    full = shape[last]
    if full is None:
        return None
    start = int(begin[last])
    extent = full - start if int(size[last]) == -1 else int(size[last])
    if not (start >= 0 and extent > 0 and start + extent <= full):
        return None
    return node.inputs[0], start, extent


def _tiles(graph: Graph, whole: TensorRef, calls: list[tuple[Node, int, int]]) -> bool:
    """Whether the slices cover the whole last axis once, in some order."""
    full = (graph.info(whole).shape or (None,))[-1]
    at = 0
    for _, begin, size in sorted(calls, key=lambda c: c[1]):
        if begin != at:
            return False
        at += size
    return at == full


def _merge(graph: Graph, whole: TensorRef, calls: list[tuple[Node, int, int]]) -> None:
    first = calls[0][0]
    shape = first.outputs[0].shape
    assert shape is not None
    full = (graph.info(whole).shape or (None,))[-1]
    b = NodeBuilder(graph, first.name + "_siblings", first.device)
    merged = b.op(
        first.op,
        [first.inputs[0], whole],
        TensorInfo(first.outputs[0].dtype, (*shape[:-1], full)),
        dict(first.attrs),
        base="call",
    )
    for node, begin, size in calls:
        starts = np.zeros(len(shape), np.int32)
        extents = np.full(len(shape), -1, np.int32)
        starts[-1], extents[-1] = begin, size
        graph.remove([node.name])
        b.op(
            "Slice",
            [merged, b.const(starts, "int32", "begin"), b.const(extents, "int32", "size")],
            node.outputs[0],
            {"T": first.attrs["T"], "Index": DType("int32")},
            name=node.name,
        )
