"""broadcast-grads: a broadcasting op's gradient, reduced over axes known when it is built.

The gradient TensorFlow builds for `x + y` (`*`, `-`, `/`, maximum, ... any broadcasting binary
op) sums the incoming gradient over the axes each operand was broadcast along and reshapes the
sum to the operand's shape. Where a size is unknown on both sides (`x` and `y` both `[batch,
d]`), which axes those are is decided at run time: `BroadcastGradientArgs(Shape(x), Shape(y))`
feeds a `Sum` whose axes are a tensor, and the `Reshape` reads `Shape(x)`. Neither can be
stitched: a reduction over unknown axes has no schedule, and each `Shape` ties the gradient to
the forward tensor's producer.

Where the graph proves the two unknown sizes equal (`SymbolicDims(proven=True)`: derived from
one input through ops that keep sizes, never joined by a broadcast that could have been 1 and
n), neither operand was broadcast along that axis. If every axis is decided that way or by
known sizes, the axes are constants: the `Sum` reduces over them (or is the gradient itself,
when there are none), and a `Reshape` of a value already shaped like the operand is dropped.
An axis an operand lacks or has size 1 along is summed: summing a size-1 axis changes nothing,
so this is right whatever the other size turns out to be.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tf_stitch.fusion.loop_dims import element_value_classes
from tf_stitch.fusion.symbolic_dims import LIST_READS, SymbolicDims
from tf_stitch.graph.guards import Guard
from tf_stitch.graph.io import infer_shapes
from tf_stitch.graph.ir import Graph, Node, TensorRef
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder
from tf_stitch.passes.fold_constants import fold_constants
from tf_stitch.passes.static_reshape import static_reshape


class Source(NamedTuple):
    """What a shape vector holds: the sizes of the leading `axes` axes of `tensor` (all of them
    for `Shape(t)`; `Shape(t)[:-2]`, a batched matmul's batch axes, for its gradient), or
    `sizes` (`tensor` None): constants, or in a loop body the whole shape of a tensor the
    forward loop pushed, its unknown sizes of the classes `seeds` (fusion/loop_dims.py)."""

    tensor: TensorRef | None
    axes: int
    sizes: tuple[int | None, ...] = ()
    seeds: tuple[int, ...] = ()


@graph_pass("broadcast-grads")
def broadcast_grads(graph: Graph, ctx: PassContext) -> Graph:
    """Gives the Sums of `BroadcastGradientArgs` axes constant axes where the graph decides
    them, and drops the Reshapes that then reshape a value to its own shape."""
    out = graph.copy()
    args = [n for n in out if n.op == "BroadcastGradientArgs" and not n.control_inputs]
    if not args:
        return out
    # Proofs read transposes' permutations, which are computed (Range, ConcatV2) until folded,
    # and sizes read off shapes (tensordot's reshapes), which static-reshape makes constants;
    # sizes come from the graph static-reshape gives, which knows more of them.
    folded = fold_constants.run(graph, PassContext())
    proofs = Proofs(SymbolicDims(folded, proven=True), static_reshape.run(folded, PassContext()))
    consumers = out.consumers()
    guard = Guard(out)
    changed = False
    for node in args:
        x, y = (shape_source(out, r) for r in node.inputs[:2])
        if x is None or y is None:
            continue
        for k, (own, other) in enumerate(((x, y), (y, x))):
            axes = reduced_axes(out, proofs, own, other)
            if axes is None:
                continue
            for name in consumers.get(node.output(k), []):
                reader = out.nodes[name]
                if guard.rewritable(reader):
                    changed |= _fix_sum(out, reader, node.output(k), axes, own, consumers)
    return infer_shapes(out) if changed else out


class Proofs(NamedTuple):
    dims: SymbolicDims  # which unknown sizes are equal
    shapes: Graph  # the graph whose shapes are read


def reduced_axes(graph: Graph, proofs: Proofs, own: Source, other: Source) -> list[int] | None:
    """The axes of the broadcast result that `own`'s gradient sums over, or None where one
    depends on sizes only known at run time."""
    a, b = _sizes(graph, proofs, own), _sizes(graph, proofs, other)
    if a is None or b is None:
        return None
    rank = max(len(a), len(b))
    axes = []
    for j in range(rank):
        i, k = j - (rank - len(a)), j - (rank - len(b))
        size = a[i] if i >= 0 else 1  # an absent axis is broadcast like a size of 1
        theirs = b[k] if k >= 0 else 1
        if size == 1:
            axes.append(j)  # broadcast, or both 1: summing a size-1 axis changes nothing
        elif size is not None or theirs == 1:
            continue  # own size is the result's
        elif theirs is None:
            mine = _symbol(proofs.dims, own, i)
            if mine is None or mine != _symbol(proofs.dims, other, k):
                return None
        else:
            return None  # own unknown, theirs a known size: own may be 1 and broadcast
    return axes


def _sizes(graph: Graph, proofs: Proofs, source: Source) -> tuple[int | None, ...] | None:
    if source.tensor is None:
        return source.sizes
    where = proofs.shapes if source.tensor.node in proofs.shapes else graph
    shape = where.info(source.tensor).shape
    return None if shape is None else shape[: source.axes]


def _symbol(dims: SymbolicDims, source: Source, axis: int) -> object:
    """The unknown size's class in the graph the proofs were made on (None if that graph
    has no such unknown size: folded to a constant there, nothing to compare)."""
    ref = source.tensor
    if ref is None:
        k = source.seeds[axis] if axis < len(source.seeds) else -1
        return None if k < 0 else dims.seed(k)
    if ref.node not in dims.graph:
        return None
    return dims.symbol(ref, axis)


def shape_source(graph: Graph, ref: TensorRef) -> Source | None:
    """The sizes a shape vector holds: `Shape(t)` or a leading run of it, else None."""
    node = graph.nodes.get(ref.node)
    if node is None or node.control_inputs:
        return None
    if node.op == "Shape":
        rank = graph.info(node.inputs[0]).rank
        return None if rank is None else Source(node.inputs[0], rank)
    if node.op in LIST_READS and ref.index == LIST_READS[node.op] and node.inputs:
        held = graph.nodes.get(node.inputs[0].node)
        if held is None or held.op != "Placeholder":
            return None
        classes, sizes = element_value_classes(held)
        if not classes or len(classes) != len(sizes):
            return None
        known = tuple(None if s < 0 else s for s in sizes)
        return Source(None, len(sizes), known, classes)
    if node.op == "Const":
        value = constant_value(graph, ref)
        if value is None or value.ndim != 1 or np.any(value < 0):
            return None
        return Source(None, len(value), tuple(int(v) for v in value))
    if node.op == "StridedSlice":
        whole = shape_source(graph, node.inputs[0])
        if whole is None:
            return None
        count = _prefix(graph, node, whole.axes)
        partial = whole.tensor is not None and whole.axes != graph.info(whole.tensor).rank
        if count is None or partial:
            return None
        return Source(whole.tensor, count, whole.sizes[:count])
    return None


def _prefix(graph: Graph, node: Node, length: int) -> int | None:
    """How many leading elements of a vector of `length` the StridedSlice `node` takes, or
    None if it takes anything else."""
    masks = ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
    if any(int(node.attrs.get(m, 0)) for m in masks):
        return None
    begin, end, strides = (constant_value(graph, r) for r in node.inputs[1:4])
    if begin is None or end is None or strides is None or strides.shape != (1,):
        return None
    if int(strides[0]) != 1:
        return None
    if not (int(node.attrs.get("begin_mask", 0)) & 1 or int(begin[0]) in (0, -length)):
        return None
    if int(node.attrs.get("end_mask", 0)) & 1:
        return length
    stop = int(end[0])
    return max(0, min(length, stop + length if stop < 0 else stop))


def _fix_sum(
    graph: Graph,
    node: Node,
    axes_ref: TensorRef,
    axes: list[int],
    own: Source,
    consumers: dict[TensorRef, list[str]],
) -> bool:
    if node.op != "Sum" or node.inputs[1:] != [axes_ref]:
        return False
    dtype = node.attrs.get("Tidx")
    index_type = getattr(dtype, "name", "int32")
    if axes:
        const = NodeBuilder(graph, node.name, node.device).const(
            np.asarray(axes, np.int64 if index_type == "int64" else np.int32),
            index_type,
            base="broadcast_axes",
        )
        node.inputs = [node.inputs[0], const]
        return True
    # Nothing summed: the gradient has the broadcast result's shape, which is own's where own
    # is a whole tensor's shape, so a Reshape of it to Shape(own) changes nothing.
    grad = node.inputs[0]
    # (a vector of seeds holds the whole shape of a tensor the forward loop pushed)
    tensor = own.tensor
    whole = bool(own.seeds) if tensor is None else own.axes == graph.info(tensor).rank
    for name in consumers.get(node.output(0), []):
        reader = graph.nodes.get(name)
        if (
            whole
            and reader is not None
            and reader.op == "Reshape"
            and reader.inputs[0] == node.output(0)
            and shape_source(graph, reader.inputs[1]) == own
            and not reader.control_inputs
        ):
            graph.replace_uses(reader.output(0), grad)
    graph.replace_uses(node.output(0), grad)
    return True
