"""How each op relates unknown sizes: the pairs that `SymbolicDims` (symbolic_dims.py) joins.

An unknown size is a `Dim`, (node, output, axis). `relations(graph, node, aligned)` yields the
pairs of them that `node` makes equal: an identity-like op or a whole-axis slice keeps its
input's sizes, a transpose permutes them, a reduction keeps its kept axes, a matmul its rows,
columns and contracted axis, an Einsum each label's, a reshape the axes it leaves alone (and the
sizes its target shape reads off `Shape`), a concatenation its other axes. The operands and
result of a broadcasting op are related by the `aligned` it is given: this module's `aligned`
(the kernels' assumption: right-aligned unknown sizes are equal), or a function that records
`broadcasts` instead (numpy broadcasting as it is, which `SymbolicDims(proven=True)` resolves
afterwards).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

from tf_stitch.fusion.op_kinds import OpKind, op_spec
from tf_stitch.fusion.static_args import reduction_axes, transpose_perm
from tf_stitch.graph.ir import Graph, Node, TensorRef
from tf_stitch.graph.values import constant_value

Dim = tuple[str, int, int]  # (node, output, axis)
# How a broadcasting op relates its operands' aligned sizes to its result's (see `aligned`).
Aligned = Callable[..., Iterator[tuple[Dim, Dim]]]
# An unknown size of a broadcast's result and its operands' aligned sizes (a Dim, or known).
Broadcast = tuple[Dim, list[Dim | int]]

# Ops whose first output has the shape of their first input.
_SAME_SHAPE_OPS = frozenset(
    {
        "Identity",
        "IdentityN",
        "StopGradient",
        "Snapshot",
        "PreventGradient",
        "CheckNumerics",
        "CheckNumericsV2",
        "EnsureShape",
        "Softmax",
        "LogSoftmax",
        "BiasAdd",
        "FusedBatchNorm",
        "FusedBatchNormV2",
        "FusedBatchNormV3",
        "Switch",
        "Enter",
        "Exit",
        "NextIteration",
        "OnesLike",
        "ZerosLike",
    }
)
# Ops whose output's axis 0 is their input's axis 0 (NHWC or NCHW images, pooled or convolved).
_BATCH_OPS = frozenset(
    {
        "Conv2D",
        "Conv3D",
        "DepthwiseConv2dNative",
        "_FusedConv2D",
        "_FusedDepthwiseConv2dNative",
        "MaxPool",
        "AvgPool",
        "MaxPoolV2",
    }
)


def relations(graph: Graph, node: Node, aligned: Aligned) -> Iterator[tuple[Dim, Dim]]:
    """Pairs of unknown dims that `node` makes equal; `aligned` relates a broadcast's."""
    if not node.outputs or any(r.node not in graph for r in node.inputs):
        return
    out = node.output(0)
    kind = op_spec(node.op).kind
    if node.op == "Select":  # a condition of lower rank picks whole rows (aligned left)
        cond, *values = node.inputs
        same = graph.info(cond).rank == node.outputs[0].rank
        yield from aligned(graph, out, [cond, *values] if same else values)
        if not same and graph.info(cond).rank == 1:
            yield from _axes(graph, cond, out, {0: 0})
    elif kind is OpKind.ELEMENTWISE or node.op == "AddN":
        yield from aligned(graph, out, list(node.inputs))
    elif node.op in _SAME_SHAPE_OPS and node.inputs:
        for i, ref in enumerate(node.inputs if node.op == "IdentityN" else node.inputs[:1]):
            yield from _axes(graph, ref, node.output(i), {a: a for a in _range(graph, ref)})
    elif kind is OpKind.RESHAPE:
        yield from _reshape(graph, node)
    elif kind is OpKind.TRANSPOSE:
        perm = transpose_perm(graph, node)
        if perm is not None:
            yield from _axes(graph, node.inputs[0], out, {j: i for j, i in enumerate(perm)})
    elif kind is OpKind.REDUCE:
        yield from _reduction(graph, node)
    elif node.op in ("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"):
        yield from _matmul(graph, node, aligned)
    elif node.op == "Einsum":
        yield from _einsum(graph, node)
    elif node.op in ("ConcatV2", "Pack"):
        yield from _concat(graph, node)
    elif node.op in ("Slice", "StridedSlice", "Split", "SplitV", "Unpack"):
        yield from _whole_axes(graph, node)
    elif node.op == "GatherV2":
        yield from _gather(graph, node)
    elif node.op == "Tile":
        multiples = constant_value(graph, node.inputs[1])
        if multiples is not None and multiples.ndim == 1:
            kept = {a: a for a, m in enumerate(multiples) if int(m) == 1}
            yield from _axes(graph, node.inputs[0], out, kept)
    elif node.op in ("BroadcastTo", "Fill"):  # sizes read off a shape; a broadcast operand
        for j, source in enumerate(
            _dim_sources(graph, node.inputs[0 if node.op == "Fill" else 1], 0)
        ):
            if source is not None:
                yield from _axes(graph, source[0], out, {j: source[1]})
        if node.op == "BroadcastTo":
            yield from aligned(graph, out, node.inputs[:1])
    elif node.op in _BATCH_OPS and node.inputs:
        yield from _axes(graph, node.inputs[0], out, {0: 0})


def dim(graph: Graph, ref: TensorRef, axis: int) -> Dim | None:
    shape = graph.info(ref).shape
    if shape is None or not 0 <= axis < len(shape) or shape[axis] is not None:
        return None
    return (ref.node, ref.index, axis)


def _range(graph: Graph, ref: TensorRef) -> range:
    return range(graph.info(ref).rank or 0)


def _axes(
    graph: Graph, src: TensorRef, dst: TensorRef, dst_to_src: dict[int, int]
) -> Iterator[tuple[Dim, Dim]]:
    """dst's axis j has the size of src's axis dst_to_src[j]."""
    for j, i in dst_to_src.items():
        a, b = dim(graph, dst, j), dim(graph, src, i)
        if a is not None and b is not None:
            yield a, b


def aligned(
    graph: Graph, out: TensorRef, refs: list[TensorRef], axes: range | None = None
) -> Iterator[tuple[Dim, Dim]]:
    """numpy broadcasting: right-aligned unknown dims of the operands and the result (of the
    result's `axes`, all by default), as the kernels assume them: equal."""
    rank = graph.info(out).rank
    if rank is None:
        return
    for ref in refs:
        r = graph.info(ref).rank
        if r is not None and r <= rank:
            kept = range(rank) if axes is None else axes
            mapping = {rank - r + i: i for i in range(r) if rank - r + i in kept}
            yield from _axes(graph, ref, out, mapping)


def broadcasts(
    graph: Graph, out: TensorRef, refs: list[TensorRef], axes: range | None = None
) -> Iterator[Broadcast]:
    """numpy broadcasting as it is: each unknown size of the result (of its `axes`) with the
    operands' aligned sizes (absent operand axes left out)."""
    rank = graph.info(out).rank
    shapes = [graph.info(ref).shape for ref in refs]
    if rank is None or any(s is None or len(s) > rank for s in shapes):
        return  # an operand of unknown rank: nothing is proven
    for j in range(rank) if axes is None else axes:
        result = dim(graph, out, j)
        if result is None:
            continue
        operands: list[Dim | int] = []
        for ref, shape in zip(refs, shapes, strict=True):
            assert shape is not None
            i = j - (rank - len(shape))
            if i >= 0:
                size = shape[i]
                operands.append(size if size is not None else (ref.node, ref.index, i))
        yield result, operands


def _reshape(graph: Graph, node: Node) -> Iterator[tuple[Dim, Dim]]:
    src, dst = node.inputs[0], node.output(0)
    a, b = graph.info(src).shape, graph.info(dst).shape
    if a is None or b is None:
        return
    if node.op == "Reshape":  # target sizes read off shapes (`tf.shape(x)[0]`)
        for j, source in enumerate(_dim_sources(graph, node.inputs[1], 0)):
            if source is not None:
                yield from _axes(graph, source[0], dst, {j: source[1]})
    moved = _view_axes(graph, node, len(a), len(b))
    if moved is not None:
        yield from _axes(graph, src, dst, moved)
        return
    # The longest prefix (suffix) of equal dims holding one unknown size, after (before) which
    # both shapes hold the same known number of elements: that size is the same in both.
    for flip in (False, True):
        x, y = (a[::-1], b[::-1]) if flip else (a, b)
        for k in range(min(len(x), len(y)), 0, -1):
            if x[:k] != y[:k] or x[:k].count(None) != 1:
                continue
            rest_x, rest_y = x[k:], y[k:]
            if None in rest_x or None in rest_y or _prod(rest_x) != _prod(rest_y):
                continue
            i = x[:k].index(None)
            ia, ib = (len(a) - 1 - i, len(b) - 1 - i) if flip else (i, i)
            yield from _axes(graph, src, dst, {ib: ia})
            break


def _view_axes(graph: Graph, node: Node, rank_in: int, rank_out: int) -> dict[int, int] | None:
    """ExpandDims and Squeeze keep every other axis: output axis -> input axis."""
    if node.op == "ExpandDims":
        axis = constant_value(graph, node.inputs[1])
        if axis is None or axis.size != 1:
            return None
        new = int(axis.reshape(-1)[0]) % rank_out
        kept = [j for j in range(rank_out) if j != new]
        return {j: i for i, j in enumerate(kept)}
    if node.op == "Squeeze":
        dims = node.attrs.get("squeeze_dims")
        items = getattr(dims, "items", ())
        if not items:
            return None  # (squeezes whatever is 1 at run time)
        dropped = {int(d) % rank_in for d in items}
        kept = [i for i in range(rank_in) if i not in dropped]
        return {j: i for j, i in enumerate(kept)}
    return None


def _dim_sources(graph: Graph, ref: TensorRef, depth: int) -> list[tuple[TensorRef, int] | None]:
    """For each element of a 1-D shape vector: the tensor and axis whose size it is, or None
    (Shape(t), Pack of `Shape(t)[i]` and constants, concatenations of those)."""
    node = graph.nodes.get(ref.node)
    shape = graph.info(ref).shape if node is not None else None
    if node is None or depth > 8 or shape is None or len(shape) != 1 or shape[0] is None:
        return [None] * (shape[0] or 0 if shape and len(shape) == 1 else 0)
    if node.op == "Shape":
        return [(node.inputs[0], i) for i in range(shape[0])]
    if node.op in ("Identity", "Cast"):
        return _dim_sources(graph, node.inputs[0], depth + 1)
    if node.op == "Pack" and int(node.attrs.get("axis", 0)) == 0:
        return [_scalar_source(graph, r) for r in node.inputs]
    if node.op == "ConcatV2":
        return [s for r in node.inputs[:-1] for s in _dim_sources(graph, r, depth + 1)]
    if node.op == "GatherV2":  # tf.gather(tf.shape(t), axes), as tensordot builds its shapes
        sources = _dim_sources(graph, node.inputs[0], depth + 1)
        picked, axis = constant_value(graph, node.inputs[1]), constant_value(graph, node.inputs[2])
        if (
            picked is not None
            and picked.ndim == 1
            and axis is not None
            and int(axis) == 0
            and all(-len(sources) <= int(i) < len(sources) for i in picked)
        ):
            return [sources[int(i)] for i in picked]
    return [None] * shape[0]


def _scalar_source(graph: Graph, ref: TensorRef) -> tuple[TensorRef, int] | None:
    """`Shape(t)[i]` (a StridedSlice taking one element, or a GatherV2): (t, i)."""
    node = graph.nodes.get(ref.node)
    if node is None or node.op not in ("StridedSlice", "GatherV2") or not node.inputs:
        return None
    shape_node = graph.nodes.get(node.inputs[0].node)
    if shape_node is None or shape_node.op != "Shape":
        return None
    one_element = node.op == "GatherV2" or int(node.attrs.get("shrink_axis_mask", 0)) & 1
    index = constant_value(graph, node.inputs[1]) if one_element else None
    if index is None or index.size != 1:
        return None
    rank = graph.info(shape_node.inputs[0]).rank
    i = int(index.reshape(-1)[0])
    if rank is None or not -rank <= i < rank:
        return None
    return shape_node.inputs[0], i % rank


def _prod(dims: tuple[int | None, ...]) -> int:
    return math.prod(int(d or 0) for d in dims)


def _reduction(graph: Graph, node: Node) -> Iterator[tuple[Dim, Dim]]:
    axes = reduction_axes(graph, node)
    rank = graph.info(node.inputs[0]).rank
    if axes is None or rank is None:
        return
    kept = [a for a in range(rank) if a not in axes]
    keep = bool(node.attrs.get("keep_dims", False))
    mapping = {a: a for a in kept} if keep else {j: a for j, a in enumerate(kept)}
    yield from _axes(graph, node.inputs[0], node.output(0), mapping)


def _matmul(graph: Graph, node: Node, aligned: Aligned) -> Iterator[tuple[Dim, Dim]]:
    a, b = node.inputs[:2]
    ra, rb, ro = graph.info(a).rank, graph.info(b).rank, node.outputs[0].rank
    if ra is None or rb is None or ro is None or min(ra, rb) < 2:
        return
    ta = bool(node.attrs.get("transpose_a", node.attrs.get("adj_x", False)))
    tb = bool(node.attrs.get("transpose_b", node.attrs.get("adj_y", False)))
    rows, k_a = (ra - 1, ra - 2) if ta else (ra - 2, ra - 1)
    cols, k_b = (rb - 2, rb - 1) if tb else (rb - 1, rb - 2)
    out = node.output(0)
    yield from _axes(graph, a, out, {ro - 2: rows})
    yield from _axes(graph, b, out, {ro - 1: cols})
    da, db = dim(graph, a, k_a), dim(graph, b, k_b)
    if da is not None and db is not None:
        yield da, db
    # batch dims broadcast (their right-aligned matrices' axes are not batch axes)
    yield from aligned(graph, out, [a, b], range(ro - 2))


def _einsum(graph: Graph, node: Node) -> Iterator[tuple[Dim, Dim]]:
    """A named label is one size wherever it appears (TensorFlow's einsum checks it; only an
    ellipsis broadcasts, and equations with one are left alone)."""
    equation = node.attrs.get("equation", b"")
    text = equation.decode() if isinstance(equation, bytes) else str(equation)
    text = text.replace(" ", "")
    if "..." in text or "->" not in text:
        return
    inputs, output = text.split("->")
    labels = inputs.split(",")
    if len(labels) != len(node.inputs):
        return
    places: dict[str, list[tuple[TensorRef, int]]] = {}
    for ref, word in [*zip(node.inputs, labels, strict=True), (node.output(0), output)]:
        if graph.info(ref).rank != len(word):
            return
        for axis, label in enumerate(word):
            places.setdefault(label, []).append((ref, axis))
    for where in places.values():
        first = dim(graph, *where[0])
        for ref, axis in where[1:]:
            other = dim(graph, ref, axis)
            if first is not None and other is not None:
                yield first, other


def _concat(graph: Graph, node: Node) -> Iterator[tuple[Dim, Dim]]:
    out = node.output(0)
    rank = node.outputs[0].rank
    if rank is None:
        return
    if node.op == "Pack":
        axis = int(node.attrs.get("axis", 0)) % rank
        kept = [a for a in range(rank) if a != axis]
        for ref in node.inputs:
            yield from _axes(graph, ref, out, {a: i for i, a in enumerate(kept)})
        return
    axis_value = constant_value(graph, node.inputs[-1])
    if axis_value is None:
        return
    axis = int(axis_value) % rank
    for ref in node.inputs[:-1]:
        if graph.info(ref).rank == rank:
            yield from _axes(graph, ref, out, {a: a for a in range(rank) if a != axis})


def _whole_axes(graph: Graph, node: Node) -> Iterator[tuple[Dim, Dim]]:
    """Axes a slice or split takes whole keep their size in every output."""
    if node.op == "Split":
        axis_ref, src = node.inputs[:2]
    elif node.op == "SplitV":
        src, axis_ref = node.inputs[0], node.inputs[2]
    else:
        src, axis_ref = node.inputs[0], None
    rank = graph.info(src).rank
    if rank is None:
        return
    if axis_ref is not None:
        axis_value = constant_value(graph, axis_ref)
        if axis_value is None:
            return
        whole = {a: a for a in range(rank) if a != int(axis_value) % rank}
    elif node.op == "Unpack":  # each output is the input without its `axis`
        axis = int(node.attrs.get("axis", 0)) % rank
        whole = dict(enumerate(a for a in range(rank) if a != axis))
    elif node.op == "Slice":
        begin, size = constant_value(graph, node.inputs[1]), constant_value(graph, node.inputs[2])
        if begin is None or size is None or len(begin) != rank:
            return
        whole = {a: a for a in range(rank) if int(begin[a]) == 0 and int(size[a]) == -1}
    else:
        whole = _strided_whole_axes(graph, node, rank)
    for i in range(len(node.outputs)):
        yield from _axes(graph, src, node.output(i), whole)


def _strided_whole_axes(graph: Graph, node: Node, rank: int) -> dict[int, int]:
    """A StridedSlice's output axes that are whole input axes: output axis -> input axis (an
    axis it shrinks away, `x[:, t]`, has no output axis)."""
    if any(int(node.attrs.get(m, 0)) for m in ("ellipsis_mask", "new_axis_mask")):
        return {}
    strides = constant_value(graph, node.inputs[3])
    begin, end = constant_value(graph, node.inputs[1]), constant_value(graph, node.inputs[2])
    if strides is None or begin is None or end is None:
        return {}
    begin_mask = int(node.attrs.get("begin_mask", 0))
    end_mask = int(node.attrs.get("end_mask", 0))
    shrink = int(node.attrs.get("shrink_axis_mask", 0))
    whole: dict[int, int] = {}
    j = 0
    for a in range(rank):
        if a < len(strides) and (shrink >> a) & 1:
            continue
        if a >= len(strides) or (int(strides[a]) == 1 and (begin_mask >> a) & (end_mask >> a) & 1):
            whole[j] = a
        j += 1
    return whole


def _gather(graph: Graph, node: Node) -> Iterator[tuple[Dim, Dim]]:
    params, indices, axis_ref = node.inputs[:3]
    axis = constant_value(graph, axis_ref)
    rp, ri = graph.info(params).rank, graph.info(indices).rank
    if axis is None or int(axis) != 0 or int(node.attrs.get("batch_dims", 0)) or None in (rp, ri):
        return
    assert rp is not None and ri is not None
    out = node.output(0)
    yield from _axes(graph, indices, out, {i: i for i in range(ri)})
    yield from _axes(graph, params, out, {ri + i - 1: i for i in range(1, rp)})
