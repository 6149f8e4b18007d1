"""concat-grads: a concatenation's gradient, sliced at offsets known when it is built.

TensorFlow's gradient of `concat([x_0, ..., x_n], axis)` slices the incoming gradient `g` into
the pieces' shapes: `Slice(g, ConcatOffset(axis, ShapeN(xs))[k], ShapeN(xs)[k])`. With a batch
of unknown size those bounds are computed at run time, and a Slice of computed bounds cannot be
stitched: a recurrent model's gates (DIEN's GRUs concatenate their inputs at every step) leave
one TensorFlow Slice per piece and step.

Piece k starts where the pieces before it end along the axis, and is 0 along every other axis;
where those sizes are known, the begin is a constant. Its size is the piece's: known sizes stay,
and an unknown one becomes -1 (the whole axis) where the graph proves it `g`'s size along that
axis (`SymbolicDims(proven=True)`), so the slice takes exactly what TensorFlow's would.
"""

from __future__ import annotations

import numpy as np

from tf_stitch.fusion.symbolic_dims import SymbolicDims
from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import DType, Graph, Node, TensorRef
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder


@graph_pass("concat-grads")
def concat_grads(graph: Graph, ctx: PassContext) -> Graph:
    """Gives the Slices of a concatenation's gradient constant bounds where the graph decides
    them."""
    out = graph.copy()
    guard = Guard(out)
    found = {n.name: _offset_slice(out, n) for n in out if n.op == "Slice" and guard.rewritable(n)}
    slices = [(out.node(name), f) for name, f in found.items() if f is not None]
    if not slices:
        return out
    dims = SymbolicDims(out, proven=True)
    fed = out.fed()
    for node, (offsets, k) in slices:
        if fed & set(node.inputs):
            continue
        bounds = _bounds(out, dims, node, offsets, k)
        if bounds is None:
            continue
        begin, size = bounds
        b = NodeBuilder(out, node.name, node.device)
        node.inputs = [
            node.inputs[0],
            b.const(np.asarray(begin, np.int32), "int32", base="begin"),
            b.const(np.asarray(size, np.int32), "int32", base="size"),
        ]
        node.attrs["Index"] = DType("int32")
    return out


def _offset_slice(graph: Graph, node: Node) -> tuple[Node, int] | None:
    """(the ConcatOffset, k) of `Slice(g, ConcatOffset(..)[k], <its shape k>)`, else None."""
    if len(node.inputs) != 3:
        return None
    offsets = graph.nodes.get(node.inputs[1].node)
    if offsets is None or offsets.op != "ConcatOffset":
        return None
    k = node.inputs[1].index
    if k + 1 >= len(offsets.inputs) or offsets.inputs[k + 1] != node.inputs[2]:
        return None
    return offsets, k


def _shape_source(graph: Graph, ref: TensorRef) -> TensorRef | None:
    """The tensor `ref` is the shape of: `Shape(t)` or `ShapeN(..)[i]`."""
    node = graph.nodes.get(ref.node)
    if node is None or node.control_inputs:
        return None
    if node.op == "Shape":
        return node.inputs[0]
    if node.op == "ShapeN" and ref.index < len(node.inputs):
        return node.inputs[ref.index]
    return None


def _axis(graph: Graph, ref: TensorRef) -> int | None:
    """The concatenation axis a ConcatOffset reads: a constant, or the gradient's
    `concat_dim % Rank(x)` of two constants."""
    value = constant_value(graph, ref)
    mod = graph.nodes.get(ref.node)
    if value is None and mod is not None and mod.op == "FloorMod":
        a, b = (constant_value(graph, r) for r in mod.inputs)
        if a is not None and b is not None and a.ndim == b.ndim == 0 and int(b) > 0:
            return int(a) % int(b)
    return None if value is None or value.ndim != 0 else int(value)


def _bounds(
    graph: Graph, dims: SymbolicDims, node: Node, offsets: Node, k: int
) -> tuple[list[int], list[int]] | None:
    """Constant (begin, size) of the Slice `node` of piece `k` at `offsets`, else None."""
    axis_value = _axis(graph, offsets.inputs[0])
    pieces = [_shape_source(graph, r) for r in offsets.inputs[1 : k + 2]]
    g = node.inputs[0]
    rank = graph.info(g).rank
    if axis_value is None or rank is None:
        return None
    axis = axis_value % rank
    shapes = []
    for piece in pieces:
        shape = None if piece is None else graph.info(piece).shape
        if shape is None or len(shape) != rank:
            return None
        shapes.append(shape)
    before = [s[axis] for s in shapes[:k]]
    own, piece = shapes[k], pieces[k]
    if piece is None or own[axis] is None or None in before:
        return None
    begin = [0] * rank
    begin[axis] = sum(d for d in before if d is not None)
    size = []
    g_shape = graph.info(g).shape or ()
    for a, d in enumerate(own):
        if d is not None:
            size.append(d)
        elif a != axis and g_shape[a] is None and _same(dims, g, piece, a):
            size.append(-1)  # the whole axis: proven g's size
        else:
            return None
    return begin, size


def _same(dims: SymbolicDims, a: TensorRef, b: TensorRef, axis: int) -> bool:
    sa, sb = dims.symbol(a, axis), dims.symbol(b, axis)
    return sa is not None and sa == sb
