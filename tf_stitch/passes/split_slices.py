"""split-slices: Split, SplitV and range-only StridedSlices become Slices (one per piece).

A StridedSlice that also shrinks axes (`x[:, t]`) becomes a Slice of size 1 on those axes and a
Squeeze of them: the Slice is read in place by a kernel, the Squeeze is a free view.

`Slice(x, begin, size)` with constant arguments is the one slicing op the fuser understands (a
view of an input at an offset); Keras' LSTM/GRU cells split their gate pre-activations with
Split/SplitV.
"""

from __future__ import annotations

import numpy as np

from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import AttrList, DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder


@graph_pass("split-slices")
def split_slices(graph: Graph, ctx: PassContext) -> Graph:
    """Rewrites Split/SplitV with a constant axis (and sizes), and StridedSlices that only take
    a range of each axis, into Slice nodes."""
    out = graph.copy()
    guard = Guard(out)
    for node in list(out):
        if node.op == "StridedSlice" and guard.rewritable(node):
            _strided_to_slice(out, node)
            continue
        if node.op not in ("Split", "SplitV") or not guard.rewritable(node):
            continue
        pieces = _pieces(out, node)
        if pieces is not None:
            _rewrite(out, node, *pieces)
    return out


def _pieces(graph: Graph, node: Node) -> tuple[TensorRef, int, list[int]] | None:
    """(the split tensor, the axis, the size of every piece), or None if not all constant."""
    if node.op == "Split":
        axis_ref, value = node.inputs
    else:
        value, _sizes, axis_ref = node.inputs
    axis_value = constant_value(graph, axis_ref)
    shape = graph.info(value).shape
    if axis_value is None or shape is None:
        return None
    axis = int(axis_value) % len(shape)
    if any(o.shape is None or o.shape[axis] is None for o in node.outputs):
        return None
    sizes = [int((o.shape or ())[axis] or 0) for o in node.outputs]
    return value, axis, sizes


def _rewrite(graph: Graph, node: Node, value: TensorRef, axis: int, sizes: list[int]) -> None:
    rank = len(graph.info(value).shape or ())
    b = NodeBuilder(graph, node.name, node.device)
    start = 0
    for i, size in enumerate(sizes):
        begin = np.zeros(rank, np.int32)
        extent = np.full(rank, -1, np.int32)
        begin[axis], extent[axis] = start, size
        start += size
        piece = b.op(
            "Slice",
            [value, b.const(begin, "int32", f"begin_{i}"), b.const(extent, "int32", f"size_{i}")],
            node.outputs[i],
            {"T": node.attrs["T"], "Index": DType("int32")},
            base=f"piece_{i}",
        )
        graph.replace_uses(node.output(i), piece)
    graph.remove([node.name])


def _strided_to_slice(graph: Graph, node: Node) -> None:
    """A StridedSlice with stride 1 and no new or ellipsis axes is a Slice (and a Squeeze of
    the axes it shrinks)."""
    if any(int(node.attrs.get(m, 0)) for m in ("new_axis_mask", "ellipsis_mask")):
        return
    shrink = int(node.attrs.get("shrink_axis_mask", 0))
    shape = graph.info(node.inputs[0]).shape
    begin, end, strides = (constant_value(graph, r) for r in node.inputs[1:4])
    if shape is None or begin is None or end is None or strides is None:
        return
    if np.any(strides != 1) or not 0 < len(begin) <= len(shape):
        return
    begin_mask, end_mask = int(node.attrs.get("begin_mask", 0)), int(node.attrs.get("end_mask", 0))
    # Axes past the given bounds are taken whole (`x[:, t]` of a rank-3 tensor).
    for i in range(len(begin), len(shape)):
        begin_mask |= 1 << i
        end_mask |= 1 << i
    begin = np.concatenate([begin, np.zeros(len(shape) - len(begin), begin.dtype)])
    end = np.concatenate([end, np.zeros(len(shape) - len(end), end.dtype)])
    starts, sizes = [], []
    for i, dim in enumerate(shape):
        if (shrink >> i) & 1:  # one index; TensorFlow ignores the masks and end here
            index = int(begin[i])
            if dim is None or not -dim <= index < dim:
                return
            starts.append(index % dim)
            sizes.append(1)
            continue
        lo = 0 if (begin_mask >> i) & 1 else int(begin[i])
        hi = None if (end_mask >> i) & 1 else int(end[i])
        if (lo < 0 or (hi is not None and hi < 0)) and dim is None:
            return
        if dim is not None:
            lo = min(max(lo + dim if lo < 0 else lo, 0), dim)
            hi = dim if hi is None else min(max(hi + dim if hi < 0 else hi, 0), dim)
        starts.append(lo)
        sizes.append(-1 if hi is None or (dim is not None and hi == dim) else max(hi - lo, 0))
    b = NodeBuilder(graph, node.name, node.device)
    begin_ref = b.const(np.asarray(starts, np.int32), "int32", "begin")
    size_ref = b.const(np.asarray(sizes, np.int32), "int32", "size")
    inputs = [node.inputs[0], begin_ref, size_ref]
    attrs = {"T": node.attrs["T"], "Index": DType("int32")}
    if not shrink:
        graph.nodes[node.name] = Node(
            node.name, "Slice", inputs, attrs, list(node.outputs), device=node.device
        )
        return
    window = tuple(
        1 if (shrink >> i) & 1 else (dim if size == -1 else size)
        for i, (dim, size) in enumerate(zip(shape, sizes, strict=True))
    )
    out = node.outputs[0]
    piece = b.op("Slice", inputs, TensorInfo(out.dtype, window), attrs, base="window")
    axes = tuple(i for i in range(len(shape)) if (shrink >> i) & 1)
    graph.nodes[node.name] = Node(
        node.name,
        "Squeeze",
        [piece],
        {"T": node.attrs["T"], "squeeze_dims": AttrList("i", axes)},
        [out],
        device=node.device,
    )
