"""sum-of-products: a sum of matmuls over rows (an unrolled recurrence's weight gradient) becomes
one matmul of the rows stacked.

The gradient of a weight an unrolled recurrence applies at every step t is the sum of its
steps' gradients, `dW = AddN(MatMul(a_t, b_t, transpose_a=True) for t)`: T small GEMMs (one
per step, each [K, M] x [M, N]) and the sum of T results. Summing over the steps is summing
over more rows, so it is one GEMM of the rows side by side:

    dW = MatMul(ConcatV2(a_0, ..., a_{T-1}, axis=0), ConcatV2(b_0, ..., b_{T-1}, axis=0),
                transpose_a=True)

T launches become three (two concatenations, which the kernels writing the a_t or b_t may write
part by part, and one GEMM of T times more rows); where the a_t are the pieces of one Unpack in
order (a time-major sequence), their concatenation is a Reshape of it. The sum is the same up
to the order of float additions, as the GEMM's own blocking orders them.
"""

from __future__ import annotations

import numpy as np

from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder
from tf_stitch.passes.sum_terms import finish_sum, replace_terms, sole_terms

MIN_TERMS = 2


@graph_pass("sum-of-products")
def sum_of_products(graph: Graph, ctx: PassContext) -> Graph:
    """Replaces the row-reducing MatMuls an AddN sums by one MatMul of their stacked rows."""
    out = graph.copy()
    readers = out.consumers()
    guard = Guard(out)
    stacks: dict[tuple[TensorRef, ...], TensorRef] = {}  # one stack of the same rows
    for node in list(out):
        if node.op == "AddN" and len(node.inputs) >= MIN_TERMS:
            _rewrite(out, node, readers, guard, stacks)
    return out


def _term(graph: Graph, ref: TensorRef, guard: Guard) -> Node | None:
    """The MatMul `ref` is, if it sums over its operands' rows."""
    node = graph.nodes.get(ref.node)
    if node is None or node.op != "MatMul" or ref.index != 0:
        return None
    if not node.attrs.get("transpose_a") or node.attrs.get("transpose_b"):
        return None
    if not guard.removable(node):
        return None
    if getattr(node.attrs.get("T"), "name", None) != "float32":
        return None
    a, b = (graph.info(r).shape for r in node.inputs[:2])
    if a is None or b is None or len(a) != 2 or len(b) != 2 or a[1] is None or b[1] is None:
        return None
    return node


def _rewrite(
    graph: Graph,
    add: Node,
    readers: dict[TensorRef, list[str]],
    guard: Guard,
    stacks: dict[tuple[TensorRef, ...], TensorRef],
) -> None:
    families: dict[tuple[int | None, int | None], list[Node]] = {}
    for ref in sole_terms(add, readers):
        term = _term(graph, ref, guard)
        if term is not None:
            a_shape, b_shape = (graph.info(r).shape for r in term.inputs[:2])
            assert a_shape is not None and b_shape is not None
            families.setdefault((a_shape[1], b_shape[1]), []).append(term)
    for (k, n), terms in families.items():
        if len(terms) < MIN_TERMS:
            continue
        terms = _in_sequence_order(graph, terms)
        b = NodeBuilder(graph, add.name + "/sum_of_products", add.device)
        sides = []
        for side, width in ((0, k), (1, n)):
            parts = tuple(t.inputs[side] for t in terms)
            if parts not in stacks:  # the steps' gradients, shared by several weights' sums
                stacks[parts] = _stacked(graph, b, list(parts), width)
            sides.append(stacks[parts])
        left, right = sides
        attrs = dict(terms[0].attrs)
        product = b.op("MatMul", [left, right], TensorInfo("float32", (k, n)), attrs)
        replace_terms(graph, add, [t.output(0) for t in terms], product)
    finish_sum(add)


def _in_sequence_order(graph: Graph, terms: list[Node]) -> list[Node]:
    """`terms` ordered by the step of their left operands where those are the pieces of one
    Unpack (the tape sums the steps last to first): their stack is then the sequence itself."""
    steps = {t.inputs[0].node for t in terms}
    if len(steps) != 1:
        return terms
    return sorted(terms, key=lambda t: t.inputs[0].index)


def _stacked(graph: Graph, b: NodeBuilder, parts: list[TensorRef], width: int | None) -> TensorRef:
    """`parts` ([rows, width] each) one above the other: a Reshape of the time-major sequence
    they are the pieces of (an Unpack's outputs in order), else a ConcatV2."""
    rows = [(graph.info(p).shape or (None,))[0] for p in parts]
    known = [r for r in rows if r is not None]
    out = TensorInfo("float32", (sum(known) if len(known) == len(rows) else None, width))
    unpack = graph.nodes.get(parts[0].node)
    if (
        unpack is not None
        and unpack.op == "Unpack"
        and int(unpack.attrs.get("axis", 0)) == 0
        and parts == [unpack.output(i) for i in range(len(unpack.outputs))]
    ):
        shape = b.const(np.asarray([-1, width], np.int32), "int32", "rows")
        reshape = {"T": DType("float32"), "Tshape": DType("int32")}
        return b.op("Reshape", [unpack.inputs[0], shape], out, reshape)
    axis = b.const(np.int32(0), "int32", "axis")
    concat = {"T": DType("float32"), "N": len(parts), "Tidx": DType("int32")}
    return b.op("ConcatV2", [*parts, axis], out, concat)
