"""batch-matmuls: the per-step input projections of an unrolled RNN become one matmul.

An unrolled recurrent layer unstacks its (time-major) input and multiplies every step by the
same weights: `MatMul(Unpack(X)[t], W)` for t = 0..T-1. Those T products do not depend on the
recurrence, so they are one product of the whole sequence,
`R = Reshape(MatMul(Reshape(X, [-1, F]), W), [T, -1, N])`, and step t reads its slice of R
(`Reshape(Slice(R, [t, 0, 0], [1, -1, -1]), [-1, N])`), which a stitched kernel reads in place.
T launches become one, and the matmul gets T times more rows to work on.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder


@graph_pass("batch-matmuls")
def batch_matmuls(graph: Graph, ctx: PassContext) -> Graph:
    """Replaces MatMuls of every piece of one Unpack by the same weights with one MatMul."""
    out = graph.copy()
    guard = Guard(out)
    families: dict[tuple[str, TensorRef, bool], list[Node]] = defaultdict(list)
    for node in out:
        if node.op != "MatMul" or not guard.removable(node) or node.attrs.get("transpose_a"):
            continue
        lhs = out.nodes.get(node.inputs[0].node)
        if lhs is None or lhs.op != "Unpack" or int(lhs.attrs.get("axis", 0)) != 0:
            continue
        families[(lhs.name, node.inputs[1], bool(node.attrs.get("transpose_b")))].append(node)
    # (transpose_b is part of the key: the copied MatMul attributes carry it)
    for (unpack, weights, _), matmuls in families.items():
        if len(matmuls) >= 2:
            _batch(out, out.node(unpack), weights, matmuls)
    return out


def _batch_major_source(graph: Graph, x: TensorRef) -> TensorRef | None:
    """Y if `x` is Transpose(Y, [1, 0, 2]) (Keras makes batch-major sequences time-major)."""
    node = graph.nodes.get(x.node)
    if node is None or node.op != "Transpose":
        return None
    perm = constant_value(graph, node.inputs[1])
    if perm is None or perm.tolist() != [1, 0, 2]:
        return None
    return node.inputs[0]


def _batch(graph: Graph, unpack: Node, weights: TensorRef, matmuls: list[Node]) -> None:
    x = unpack.inputs[0]
    batch_major = _batch_major_source(graph, x)
    shape = graph.info(x).shape
    if shape is None or len(shape) != 3 or shape[0] is None or shape[2] is None:
        return
    steps, features = shape[0], shape[2]
    n = matmuls[0].outputs[0].shape[-1] if matmuls[0].outputs[0].shape else None
    if n is None or (
        shape[1] is not None and any(m.outputs[0].shape != (shape[1], n) for m in matmuls)
    ):
        return
    rows = None if shape[1] is None else steps * shape[1]
    b = NodeBuilder(graph, f"{unpack.name}/batched_matmul", matmuls[0].device)
    dtype = graph.info(x).dtype
    attrs = {"T": DType(dtype), "Tshape": DType("int32")}
    # Multiply the batch-major sequence when there is one: its Transpose is then not needed.
    source = batch_major if batch_major is not None else x
    flat = b.op(
        "Reshape",
        [source, b.const(np.asarray([-1, features], np.int32), "int32", "rows")],
        TensorInfo(dtype, (rows, features)),
        attrs,
    )
    mm_attrs = dict(matmuls[0].attrs)
    product = b.op("MatMul", [flat, weights], TensorInfo(dtype, (rows, n)), mm_attrs)
    seq_shape = [-1, steps, n] if batch_major is not None else [steps, -1, n]
    seq = b.op(
        "Reshape",
        [product, b.const(np.asarray(seq_shape, np.int32), "int32", "seq")],
        TensorInfo(dtype, tuple(shape[1] if d == -1 else d for d in seq_shape)),
        attrs,
    )
    time_axis = 1 if batch_major is not None else 0
    for mm in matmuls:
        t = int(mm.inputs[0].index)
        begin, size = np.zeros(3, np.int32), np.full(3, -1, np.int32)
        begin[time_axis], size[time_axis] = t, 1
        piece_shape = [shape[1], n]
        piece_shape.insert(time_axis, 1)
        piece = b.op(
            "Slice",
            [seq, b.const(begin, "int32", f"begin_{t}"), b.const(size, "int32", f"size_{t}")],
            TensorInfo(dtype, tuple(piece_shape)),
            {"T": DType(dtype), "Index": DType("int32")},
            base=f"step_{t}",
        )
        target = b.const(np.asarray([-1, n], np.int32), "int32", f"shape_{t}")
        graph.remove([mm.name])
        graph.add(
            Node(mm.name, "Reshape", [piece, target], attrs, list(mm.outputs), device=mm.device)
        )
