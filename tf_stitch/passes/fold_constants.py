"""fold-constants: small stateless computations on constants are computed now, by TensorFlow.

Per-channel batch-norm factors, scaled biases and the like become constants, so stitched
kernels load one value instead of recomputing it for every element. Values are computed by
TensorFlow itself, so they are exactly what the original graph computes.
"""

from __future__ import annotations

import numpy as np

from tf_stitch.fusion.legality import is_stateful
from tf_stitch.fusion.op_kinds import OpKind, op_kind
from tf_stitch.graph.evaluate import evaluate
from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorValue
from tf_stitch.graph.shape_values import partial_value
from tf_stitch.passes.base import PassContext, graph_pass

MAX_FOLDED_ELEMENTS = 1 << 16
MAX_SWEEPS = 4
_FOLDABLE_KINDS = (OpKind.ELEMENTWISE, OpKind.REDUCE, OpKind.RESHAPE, OpKind.BROADCAST)
# Array ops that build shapes and permutations (tf.tensordot, Keras) and are safe to fold.
_FOLDABLE_ARRAY_OPS = frozenset(
    {
        "ConcatV2",
        "Pack",
        "GatherV2",
        "Cast",
        "Fill",
        "Range",
        "StridedSlice",
        "Slice",
        "Transpose",
        "Tile",
        "Unpack",
        "ZerosLike",
        "OnesLike",
        "MatrixBandPart",
        "InvertPermutation",
        # integer arithmetic the fuser leaves to TensorFlow (a gradient's axis modulo a rank)
        "FloorMod",
        "FloorDiv",
        "TruncateMod",
        "TruncateDiv",
        "Mod",
    }
)
# Ops of shape arithmetic whose value graph/shape_values.py may know from static sizes alone.
_SHAPE_ARITHMETIC = frozenset(
    {"Slice", "Squeeze", "Reshape", "ExpandDims", "GatherV2", "Pack", "ConcatV2", "Prod", "Sum"}
)
# Ops whose value is the (static) shape of their input, whatever the input's value.
_SHAPE_OPS = frozenset({"Shape", "Size", "Rank"})


@graph_pass("fold-constants")
def fold_constants(graph: Graph, ctx: PassContext) -> Graph:
    """Replaces fusible ops whose inputs are all constant (and whose result is small), until
    none is left: a value folded may make the shape arithmetic after it static (a gradient's
    axis modulo a rank, then the size at that axis)."""
    out = graph.copy()
    for _ in range(MAX_SWEEPS):
        folded = _sweep(out)
        if folded is None:
            break
        out = folded
    return out


def _sweep(graph: Graph) -> Graph | None:
    """One pass over `graph` in order; None where nothing folds."""
    out = graph.copy()
    constant: set[str] = set()
    folds: list[Node] = []
    changed = False
    guard = Guard(graph)
    for node in graph.topological_order():
        if node.op == "Const" and guard.rewritable(node):
            constant.add(node.name)  # (a fed Const's value is whatever is fed)
        elif _static_shape_op(graph, node, guard):
            # The value is the input's static shape: no need to compute the input.
            out.nodes[node.name] = _const_node(node, _shape_value(graph, node))
            constant.add(node.name)
            changed = True
        elif _known_shape_value(graph, node, guard):
            # Shape arithmetic that only reads sizes known now (a sequence length).
            known = partial_value(graph, node.output(0))
            out.nodes[node.name] = _const_node(node, np.asarray(known, _np_int(node)))
            constant.add(node.name)
            changed = True
        elif _foldable(node, constant, guard):
            constant.add(node.name)
            folds.append(node)
    if folds:
        values = evaluate(out, sorted(constant), [n.output(0) for n in folds])
        for node, value in zip(folds, values, strict=True):
            out.nodes[node.name] = _const_node(node, value)
    return out if changed or folds else None


def _const_node(node: Node, value: np.ndarray) -> Node:
    dtype = node.outputs[0].dtype
    return Node(
        node.name,
        "Const",
        attrs={"value": TensorValue(value, dtype), "dtype": DType(dtype)},
        outputs=[TensorInfo(dtype, tuple(value.shape))],
        device=node.device,
    )


def _shape_value(graph: Graph, node: Node) -> np.ndarray:
    shape = [int(d or 0) for d in graph.info(node.inputs[0]).shape or ()]
    np_dtype = np.int64 if node.outputs[0].dtype == "int64" else np.int32
    if node.op == "Shape":
        return np.asarray(shape, dtype=np_dtype)
    if node.op == "Size":
        return np.asarray(int(np.prod(shape)), dtype=np_dtype)
    return np.asarray(len(shape), dtype=np_dtype)


def _np_int(node: Node) -> type:
    return np.int64 if node.outputs[0].dtype == "int64" else np.int32


def _known_shape_value(graph: Graph, node: Node, guard: Guard) -> bool:
    """An integer op of shape arithmetic whose value is known although its input's is not (a
    static dim of Shape(x) where x has an unknown batch)."""
    if node.op not in _SHAPE_ARITHMETIC or not guard.rewritable(node):
        return False
    if len(node.outputs) != 1 or node.outputs[0].dtype not in ("int32", "int64"):
        return False
    value = partial_value(graph, node.output(0))
    if isinstance(value, int):
        return True
    return isinstance(value, list) and None not in value


def _static_shape_op(graph: Graph, node: Node, guard: Guard) -> bool:
    if node.op not in _SHAPE_OPS or not guard.rewritable(node):
        return False
    return graph.info(node.inputs[0]).fully_defined()


def _foldable(node: Node, constant: set[str], guard: Guard) -> bool:
    foldable_op = op_kind(node.op) in _FOLDABLE_KINDS or node.op in _FOLDABLE_ARRAY_OPS
    if not foldable_op or not guard.rewritable(node):
        return False
    if len(node.outputs) != 1 or is_stateful(node.op):
        return False
    size = node.outputs[0].num_elements()
    if size is None or size > MAX_FOLDED_ELEMENTS:
        return False
    return all(r.node in constant for r in node.inputs)
