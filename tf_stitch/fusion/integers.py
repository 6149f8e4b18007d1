"""Which integer (and float division) ops a kernel may compute: the node rules that
legality.py applies to ops on integers.

A kernel computes integers with TensorFlow's results (codegen/cpu_int.h): wrapping arithmetic,
division rounding toward negative infinity or zero, clamped shifts. It leaves to TensorFlow:
- shape arithmetic: an integer value of a few elements (a Shape's dims, a slice's bounds, a
  Reshape's target). TensorFlow computes those on the host even on a GPU, and Grappler's
  constant folding and shape inference need them as ops of the graph;
- an integer division by a tensor that may hold 0: TensorFlow raises "Integer division by
  zero" for it, which a kernel cannot; so the divisor must be a constant without zeros;
- a float cast to an integer narrower than 32 bits or to uint32 / uint64, unless the float is
  clamped to the integer's range by constants first (tf.clip_by_value, as quantization does):
  TensorFlow's CPU result for a value out of the range depends on the path its kernel takes
  (vectorized or not: the last elements of a tensor differ from the others; float32 or
  float64), so no kernel could match it. Casts to int32 and int64 give the minimum value for
  NaN and values out of range on every path, and so do kernels;
- the select of Keras' `take` that wraps negative ids (`where(ids < 0, ids + rows, ids)`)
  before a gather: the gather's kernel reads the ids and wraps them itself;
- FloorDiv, FloorMod and Mod of 16-bit floats: TensorFlow rounds the quotient to 16 bits
  before the floor, where a kernel computes in float32.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tf_stitch.fusion.decision import Decision, allow, forbid
from tf_stitch.fusion.layout_placer import wrapped_indices
from tf_stitch.fusion.op_kinds import (
    HALF_DTYPES,
    INT_DIVISIONS,
    INT_OPS,
    SHAPE_ARITHMETIC_ELEMENTS,
    OpKind,
    op_spec,
)
from tf_stitch.graph.ir import INT_DTYPES, DType, Graph, Node, TensorRef
from tf_stitch.graph.values import constant_value

_FLOAT_DIVISIONS = frozenset({"FloorDiv", "FloorMod", "Mod", "TruncateMod"})


def integer_legality(graph: Graph, node: Node, consumers: dict[TensorRef, list[str]]) -> Decision:
    """May `node` be computed by a kernel, as far as its integers (and divisions) go?"""
    if node.op in ("Select", "SelectV2") and _wraps_gathered_ids(graph, node, consumers):
        return forbid("wraps the ids of a gather, whose kernel wraps them itself")
    out = node.outputs[0] if node.outputs else None
    if out is not None and out.dtype in INT_DTYPES and is_shape_arithmetic(out.shape):
        return forbid(f"{out.dtype} shape arithmetic ({_fmt_shape(out.shape)}) stays TensorFlow's")
    if node.op == "Cast":
        src, dst = node.attrs["SrcT"].name, node.attrs["DstT"].name
        exact = src in INT_DTYPES or src == "bool" or dst in ("int32", "int64")
        if dst in INT_DTYPES and not exact and not _clamped_to(graph, node.inputs[0], dst):
            return forbid(
                f"a Cast of {src} to {dst} that is not clamped to its range first "
                "(TensorFlow's result out of range varies)"
            )
        return allow()
    operands = node.attrs.get("T")
    dtype = operands.name if isinstance(operands, DType) else ""
    if dtype in INT_DTYPES and op_spec(node.op).kind is OpKind.ELEMENTWISE:
        if node.op in ("OnesLike", "ZerosLike"):
            return allow()
        if node.op not in INT_OPS:
            return forbid(f"{node.op} of {dtype} is not fused")
        if node.op in INT_DIVISIONS and not _nonzero_constant(graph, node):
            return forbid(f"{node.op} of {dtype} by a tensor that may be 0 (TensorFlow raises)")
    elif node.op in _FLOAT_DIVISIONS and dtype in HALF_DTYPES:
        return forbid(f"{node.op} of {dtype} (TensorFlow rounds the quotient first)")
    return allow()


def is_shape_arithmetic(shape: tuple[int | None, ...] | None) -> bool:
    """Whether an integer value of this shape is shape arithmetic: a scalar or a short vector
    of static size."""
    if shape is None or len(shape) > 1 or None in shape:
        return False
    return len(shape) == 0 or int(shape[0] or 0) <= SHAPE_ARITHMETIC_ELEMENTS


def _fmt_shape(shape: tuple[int | None, ...] | None) -> str:
    return "a scalar" if not shape else f"{shape[0]} elements"


def _nonzero_constant(graph: Graph, node: Node) -> bool:
    divisor = constant_value(graph, node.inputs[1])
    return divisor is not None and divisor.size > 0 and bool((divisor != 0).all())


def _clamped_to(graph: Graph, ref: TensorRef, dtype: str) -> bool:
    """Whether float `ref` is clamped by constants into the values that integer `dtype` holds
    once truncated toward zero (NaN aside)."""
    info = np.iinfo(dtype)
    low, high = _bounds(graph, ref, depth=4)
    return low > float(info.min) - 1 and high < float(info.max) + 1


def _bounds(graph: Graph, ref: TensorRef, depth: int) -> tuple[float, float]:
    """Constant bounds of a float value: through Minimum / Maximum by constants (clip_by_value)
    and the ops that keep a range (rounding, Identity), else (-inf, inf)."""
    unbounded = (-math.inf, math.inf)
    node = graph.node(ref.node)
    if depth == 0 or not node.inputs:
        return unbounded
    if node.op in ("Identity", "StopGradient"):
        return _bounds(graph, node.inputs[0], depth - 1)
    if node.op in _ROUNDINGS:  # monotonic: the bounds rounded
        low, high = _bounds(graph, node.inputs[0], depth - 1)
        rounding = _ROUNDINGS[node.op]
        return _whole(low, rounding), _whole(high, rounding)
    if node.op in ("Minimum", "Maximum"):
        for x, c in (node.inputs[:2], node.inputs[1::-1]):
            limit = constant_value(graph, c)
            if limit is None or limit.size == 0:
                continue
            low, high = _bounds(graph, x, depth - 1)
            if node.op == "Minimum":
                return low, min(high, float(limit.max()))
            return max(low, float(limit.min())), high
    return unbounded


_ROUNDINGS: dict[str, Callable[[float], int]] = {
    "Round": round,  # half to even, as TensorFlow's Round and Rint
    "Rint": round,
    "Floor": math.floor,
    "Ceil": math.ceil,
}


def _whole(x: float, rounding: Callable[[float], int]) -> float:
    return float(rounding(x)) if math.isfinite(x) else x


def _wraps_gathered_ids(graph: Graph, node: Node, consumers: dict[TensorRef, list[str]]) -> bool:
    """Whether `node` is Keras' `where(ids < 0, ids + rows, ids)` of a gather from a table of
    `rows` rows: a gather's kernel reads the ids and wraps them itself (layout_placer.py), so the
    select must not hide them in another kernel."""
    for name in consumers.get(node.output(0), []):
        reader = graph.node(name)
        if reader.op != "GatherV2" or reader.inputs[1] != node.output(0):
            continue
        rows = (graph.info(reader.inputs[0]).shape or (None,))[0]
        if rows and wrapped_indices(graph, node.output(0), int(rows)) is not None:
            return True
    return False


def runs_on_the_host(graph: Graph, node: Node) -> bool:
    """Whether TensorFlow runs `node` on the host on a GPU machine: its data inputs int32 and
    its outputs int32 or bool (TensorFlow registers the GPU kernels of int32 ops with every
    argument in host memory: shape and index arithmetic)."""
    ins = [graph.info(r).dtype for r in node.inputs]
    outs = [o.dtype for o in node.outputs]
    return bool(ins) and set(ins) == {"int32"} and set(outs) <= {"int32", "bool"}
