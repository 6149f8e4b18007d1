"""slice-grads: a sum of StridedSliceGrads that tile one tensor becomes their concatenation.

The gradient of `x[:, t]` for every step t of an unrolled recurrence (or of the halves of a
gate's pre-activation, `x[:, :n]` and `x[:, n:]`) is one `StridedSliceGrad` per slice, each a
tensor of x's shape that is zero outside its window, and the tape sums them with AddN: n
kernels that write n full-size tensors, and a sum that reads them all. Where the windows tile
x along one axis (each full on every other axis, together covering that axis exactly once),
the sum is the windows' gradients side by side (other windows, overlapping them, stay terms of
the sum):

    AddN(StridedSliceGrad(Shape(x), [0, t], [0, t+1], shrink=axis 1)(dy_t) for t < T, ...)
      = AddN(Pack(dy_0, ..., dy_{T-1}, axis=1), ...)

one concatenation, which a kernel can write part by part. The values are the same: every
element of the sum is one window's gradient plus zeros. Windows that do not tile (a gap, an
overlap, a stride, an axis of unknown size) are left to TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder
from tf_stitch.passes.sum_terms import finish_sum, replace_terms, sole_terms


@dataclass(frozen=True)
class Window:
    """The slice one StridedSliceGrad writes: [start, stop) along `axis` of the tensor `of`
    (a Shape's input, or a constant shape), whole along every other axis; `shrink` when the
    slice dropped that axis (its gradient lacks it)."""

    of: str
    dims: tuple[int | None, ...]  # the tensor's shape
    axis: int
    start: int
    stop: int
    shrink: bool
    grad: TensorRef


@graph_pass("slice-grads")
def slice_grads(graph: Graph, ctx: PassContext) -> Graph:
    """Replaces the StridedSliceGrads of each AddN that tile a tensor by one Pack or ConcatV2."""
    out = graph.copy()
    readers = out.consumers()
    for node in list(out):
        if node.op == "AddN" and len(node.inputs) >= 2:
            _rewrite(out, node, readers)
    return out


def window(graph: Graph, node: Node) -> Window | None:
    """The window `node` (a StridedSliceGrad) writes, if it is one this pass can place."""
    shape_ref, begin_ref, end_ref, strides_ref, dy = node.inputs[:5]
    of, dims = _shape_of(graph, shape_ref)
    begin, end, strides = (constant_value(graph, r) for r in (begin_ref, end_ref, strides_ref))
    if of is None or dims is None or begin is None or end is None or strides is None:
        return None
    if any(int(node.attrs.get(m, 0)) for m in ("ellipsis_mask", "new_axis_mask")):
        return None
    begin_mask, end_mask, shrink_mask = (
        int(node.attrs.get(m, 0)) for m in ("begin_mask", "end_mask", "shrink_axis_mask")
    )
    if len(begin) > len(dims) or np.any(strides != 1):
        return None
    cut: list[tuple[int, int, int, bool]] = []
    for axis in range(len(begin)):
        size, shrink = dims[axis], bool(shrink_mask >> axis & 1)
        start = 0 if begin_mask >> axis & 1 else int(begin[axis])
        whole_end = bool(end_mask >> axis & 1) or (size is not None and int(end[axis]) >= size)
        if not shrink and start == 0 and whole_end:
            continue  # the whole axis
        if size is None:
            return None
        start = start + size if start < 0 else start
        stop = start + 1 if shrink else (size if whole_end else int(end[axis]))
        stop = stop + size if stop < 0 else stop
        if not 0 <= start < stop <= size:
            return None
        cut.append((axis, start, stop, shrink))
    if len(cut) != 1:
        return None
    axis, start, stop, shrink = cut[0]
    return Window(of, dims, axis, start, stop, shrink, dy)


def _shape_of(graph: Graph, ref: TensorRef) -> tuple[str | None, tuple[int | None, ...] | None]:
    """What a StridedSliceGrad's shape operand is the shape of (a key two of them share), and
    its dims."""
    value = constant_value(graph, ref)
    if value is not None:
        return f"const:{value.tolist()}", tuple(int(d) for d in value)
    node = graph.nodes.get(ref.node)
    if node is None or node.op != "Shape" or not node.inputs:
        return None, None
    shape = graph.info(node.inputs[0]).shape
    return str(node.inputs[0]), shape


def _rewrite(graph: Graph, add: Node, readers: dict[TensorRef, list[str]]) -> None:
    groups: dict[tuple[str, int], list[tuple[TensorRef, Window]]] = {}
    for ref in sole_terms(add, readers):
        grad = graph.nodes.get(ref.node)
        if grad is None or grad.op != "StridedSliceGrad" or grad.control_inputs:
            continue
        w = window(graph, grad)
        if w is not None:
            groups.setdefault((w.of, w.axis), []).append((ref, w))
    for candidates in groups.values():
        parts = _tiling(candidates)
        if parts is None:
            continue
        windows = [w for _, w in parts]
        out = TensorInfo(graph.info(parts[0][0]).dtype, windows[0].dims)
        replace_terms(graph, add, [ref for ref, _ in parts], _join(graph, add, windows, out))
    finish_sum(add)


def _tiling(
    candidates: list[tuple[TensorRef, Window]],
) -> list[tuple[TensorRef, Window]] | None:
    """Windows of `candidates` that cover their axis once, end to end, in order (any others,
    overlapping them, stay terms of the sum); None if there are none (a gap)."""
    size = candidates[0][1].dims[candidates[0][1].axis]
    by_start: dict[int, tuple[TensorRef, Window]] = {}
    for ref, w in candidates:
        by_start.setdefault(w.start, (ref, w))
    chain, at = [], 0
    while at in by_start and at != size:
        chain.append(by_start[at])
        at = by_start[at][1].stop
    return chain if at == size and len(chain) >= 2 else None


def _join(graph: Graph, add: Node, windows: list[Window], out: TensorInfo) -> TensorRef:
    """The windows' gradients side by side along their axis: a Pack of dropped axes, else a
    ConcatV2 (a dropped axis of a part restored by ExpandDims)."""
    b = NodeBuilder(graph, add.name + "/slice_grads", add.device)
    axis, dtype = windows[0].axis, out.dtype
    if all(w.shrink for w in windows):
        attrs = {"T": DType(dtype), "N": len(windows), "axis": axis}
        return b.op("Pack", [w.grad for w in windows], out, attrs)
    parts = []
    for w in windows:
        part = w.grad
        if w.shrink:
            shape = graph.info(part).shape
            expanded = None if shape is None else (*shape[:axis], 1, *shape[axis:])
            dim = b.const(np.int32(axis), "int32", "axis")
            attrs = {"T": DType(dtype), "Tdim": DType("int32")}
            part = b.op("ExpandDims", [part, dim], TensorInfo(dtype, expanded), attrs)
        parts.append(part)
    concat_axis = b.const(np.int32(axis), "int32", "concat_axis")
    attrs = {"T": DType(dtype), "N": len(parts), "Tidx": DType("int32")}
    return b.op("ConcatV2", [*parts, concat_axis], out, attrs)
