"""The one table that says what each TensorFlow op is to the fuser.

`elementwise` ops map one element of each (broadcast) operand to one output element;
`broadcast` ops only replicate; `reduce` ops reduce over constant axes (row = innermost axes,
column = outer axes: the planner decides which from the axes); `reshape` ops are free views;
`slice` ops read a constant window of a group input in place; a small `matmul` of two group
inputs is computed per block of rows into an on-chip tile that the rest of the group reads
(legality.py says which are small); a `gather` reads the rows of a table that its (per-unit)
indices pick; a `concat` of equal parts (along the last axis or an inner one) is written part
by part (at an offset) and never read in its kernel; everything else is `opaque` and never
enters a group.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tf_stitch.graph.ir import DTYPE_BYTES, INT_DTYPES


class OpKind(StrEnum):
    ELEMENTWISE = "elementwise"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    TRANSPOSE = "transpose"
    MATMUL = "matmul"
    GATHER = "gather"
    CONCAT = "concat"
    BATCH_MATMUL = "batch_matmul"
    RESHAPE = "reshape"
    SLICE = "slice"
    OPAQUE = "opaque"


@dataclass(frozen=True)
class OpSpec:
    kind: OpKind
    # How many leading inputs carry data; the rest (axes, shapes) must be constants.
    data_inputs: int
    # Relative cost of one element, for the recompute-or-buffer choice and block sizing.
    cost: int = 1


def _ew(n: int, cost: int = 1) -> OpSpec:
    return OpSpec(OpKind.ELEMENTWISE, n, cost)


_TRANSCENDENTAL = 16
_DIVISION = 4

OP_TABLE: dict[str, OpSpec] = {
    # binary arithmetic
    "Add": _ew(2),
    "AddV2": _ew(2),
    "Sub": _ew(2),
    "Mul": _ew(2),
    "RealDiv": _ew(2, _DIVISION),
    "Div": _ew(2, _DIVISION),
    "DivNoNan": _ew(2, _DIVISION),
    "Maximum": _ew(2),
    "Minimum": _ew(2),
    "Pow": _ew(2, 2 * _TRANSCENDENTAL),
    "SquaredDifference": _ew(2),
    # division and modulo rounding toward negative infinity or zero (integers, and FloorDiv /
    # FloorMod / Mod of float32 and float64; fusion/legality.py says which)
    "FloorDiv": _ew(2, _DIVISION),
    "FloorMod": _ew(2, _DIVISION),
    "TruncateDiv": _ew(2, _DIVISION),
    "TruncateMod": _ew(2, _DIVISION),
    "Mod": _ew(2, _DIVISION),
    # bitwise (integers)
    "BitwiseAnd": _ew(2),
    "BitwiseOr": _ew(2),
    "BitwiseXor": _ew(2),
    "Invert": _ew(1),
    "LeftShift": _ew(2),
    "RightShift": _ew(2),
    # comparisons and logic
    "Less": _ew(2),
    "LessEqual": _ew(2),
    "Greater": _ew(2),
    "GreaterEqual": _ew(2),
    "Equal": _ew(2),
    "NotEqual": _ew(2),
    "LogicalAnd": _ew(2),
    "LogicalOr": _ew(2),
    "LogicalNot": _ew(1),
    "Select": _ew(3),
    "SelectV2": _ew(3),
    # unary
    "Neg": _ew(1),
    "Abs": _ew(1),
    "Sign": _ew(1),
    "Exp": _ew(1, _TRANSCENDENTAL),
    "Expm1": _ew(1, _TRANSCENDENTAL),
    "Log": _ew(1, _TRANSCENDENTAL),
    "Log1p": _ew(1, _TRANSCENDENTAL),
    "Sqrt": _ew(1, _DIVISION),
    "Rsqrt": _ew(1, _DIVISION),
    "Square": _ew(1),
    "Reciprocal": _ew(1, _DIVISION),
    "Inv": _ew(1, _DIVISION),
    "Tanh": _ew(1, _TRANSCENDENTAL),
    "Sigmoid": _ew(1, _TRANSCENDENTAL),
    "Relu": _ew(1),
    "Relu6": _ew(1),
    "Elu": _ew(1, _TRANSCENDENTAL),
    "Selu": _ew(1, _TRANSCENDENTAL),
    "LeakyRelu": _ew(1),
    "Softplus": _ew(1, 2 * _TRANSCENDENTAL),
    "Softsign": _ew(1, _DIVISION),
    "Erf": _ew(1, _TRANSCENDENTAL),
    "Erfc": _ew(1, _TRANSCENDENTAL),
    "Floor": _ew(1),
    "Ceil": _ew(1),
    "Round": _ew(1),
    "Cast": _ew(1),
    # a constant of the operand's shape (its values are never read)
    "OnesLike": _ew(1),
    "ZerosLike": _ew(1),
    # free views and identities
    "Identity": OpSpec(OpKind.RESHAPE, 1, 0),
    "StopGradient": OpSpec(OpKind.RESHAPE, 1, 0),
    "Snapshot": OpSpec(OpKind.RESHAPE, 1, 0),
    "Reshape": OpSpec(OpKind.RESHAPE, 1, 0),
    "ExpandDims": OpSpec(OpKind.RESHAPE, 1, 0),
    "Squeeze": OpSpec(OpKind.RESHAPE, 1, 0),
    # broadcasts
    "BroadcastTo": OpSpec(OpKind.BROADCAST, 1, 0),
    "Tile": OpSpec(OpKind.BROADCAST, 1, 0),  # when it only repeats size-1 axes (legality.py)
    # a constant permutation: of a group input, read in place with permuted strides; of a
    # value computed in the group, written to a kernel output with permuted strides
    "Transpose": OpSpec(OpKind.TRANSPOSE, 1, 0),
    # a constant window of an input, read in place
    "Slice": OpSpec(OpKind.SLICE, 1, 0),
    # parts of equal shape side by side (sizes known from the axis on), written by the kernel
    "ConcatV2": OpSpec(OpKind.CONCAT, 0, 0),
    # rows of a table picked by indices: one indirect row offset per unit of work
    "GatherV2": OpSpec(OpKind.GATHER, 2, 1),
    # a small matmul of two group inputs, computed per block into a tile (cost: see lower.py)
    "MatMul": OpSpec(OpKind.MATMUL, 2, 0),
    # [..., M, K] @ [K, N] (a Keras EinsumDense): rows of all leading dims, tiled as MatMul
    "BatchMatMulV2": OpSpec(OpKind.MATMUL, 2, 0),
    # reductions over constant axes
    "Sum": OpSpec(OpKind.REDUCE, 1, 1),
    "Mean": OpSpec(OpKind.REDUCE, 1, 1),
    "Max": OpSpec(OpKind.REDUCE, 1, 1),
    "Min": OpSpec(OpKind.REDUCE, 1, 1),
    "Prod": OpSpec(OpKind.REDUCE, 1, 1),
}

# 16-bit floats: a kernel reads and writes them in their format and computes in float32.
HALF_DTYPES = frozenset({"float16", "bfloat16"})
# Every float dtype a kernel computes with (float64 in double, the others in float32).
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
# Dtypes a fused kernel reads, computes in and writes (float32 first; bool for masks; float64
# computed in double; integers with TensorFlow's wrapping arithmetic, codegen/cpu_int.h).
FUSIBLE_DTYPES = frozenset({"float32", "float64", "bool"}) | HALF_DTYPES | INT_DTYPES

# Ops a kernel computes on integer operands, with TensorFlow's results (codegen/cpu_int.h);
# Cast and OnesLike / ZerosLike take integers too.
INT_OPS = frozenset(
    {
        *("Add", "AddV2", "Sub", "Mul", "Neg", "Abs", "Sign", "Square", "SquaredDifference"),
        *("Maximum", "Minimum", "Relu", "Relu6"),
        *("FloorDiv", "FloorMod", "Div", "TruncateDiv", "TruncateMod", "Mod"),
        *("BitwiseAnd", "BitwiseOr", "BitwiseXor", "Invert", "LeftShift", "RightShift"),
        *("Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual"),
        *("Select", "SelectV2"),
    }
)
# Integer divisions: TensorFlow raises for a zero divisor, so a kernel divides by constants.
INT_DIVISIONS = frozenset({"FloorDiv", "FloorMod", "Div", "TruncateDiv", "TruncateMod", "Mod"})
# An integer value of at most this many elements (rank 0 or 1, static) is shape arithmetic
# (a Shape's dims, a slice's bounds, a Reshape's target): TensorFlow's CPU ops compute it,
# on a GPU on the host, and constant folding needs it in the graph (fusion/integers.py).
SHAPE_ARITHMETIC_ELEMENTS = 16


def buffer_itemsize(dtype: str) -> int:
    """Bytes of one element of a row buffer of a value of `dtype` (the memory plan's and the
    kernels': a 16-bit float is buffered as the float32 it is computed in)."""
    return 4 if dtype in HALF_DTYPES else DTYPE_BYTES[dtype]


def op_spec(op: str) -> OpSpec:
    return OP_TABLE.get(op, OpSpec(OpKind.OPAQUE, 0, 0))


def op_kind(op: str) -> OpKind:
    return op_spec(op).kind
