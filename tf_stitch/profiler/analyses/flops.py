"""Analytic FLOPs and bytes of each op, from its shapes (the graph's `op_table`).

A multiply-add is 2 FLOPs. Convolutions (`Conv2D`, `Conv3D`, `DepthwiseConv2dNative`, the
transposed `Conv2DBackpropInput`), `MatMul`, `BatchMatMul*` and `Einsum` count their
multiply-adds from the output and the contracted sizes; elementwise ops 1 FLOP per output
element (transcendental ones too, `Rsqrt` 2); reductions 1 per input element; pooling its
window per output element; softmax 5 and inference batch norm 2 per element. Data movement
(transpose, concat, gather, pad, cast, ...) is 0 FLOPs. These agree node for node with
TensorFlow's own FLOP statistics (`tf.compat.v1.profiler`) where it has them (a test checks).
Bytes are the op's input and output tensors (weights included), once each; ops that move no
data (`op_events.NO_KERNEL_OPS`) have none. An unknown dimension makes the op's figures NaN.

An op Grappler fused into another (Conv2D + BiasAdd + Relu -> `_FusedConv2D`, named as the Relu)
did not run on its own: `executed_costs` adds it to the op that ran in its place (the first op
down its chain of single consumers that did run, with another type than the graph's) and counts
the fused op's bytes as its members' inputs from outside the group and the last member's outputs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from tf_stitch.graph.ir import DTYPE_BYTES
from tf_stitch.profiler.trace.op_events import NO_KERNEL_OPS

ELEMENTWISE = frozenset(
    {
        "Add",
        "AddV2",
        "Sub",
        "Mul",
        "RealDiv",
        "Div",
        "DivNoNan",
        "Maximum",
        "Minimum",
        "Relu",
        "Relu6",
        "Elu",
        "Selu",
        "LeakyRelu",
        "Sigmoid",
        "Tanh",
        "Exp",
        "Expm1",
        "Log",
        "Log1p",
        "Sqrt",
        "Rsqrt",
        "Square",
        "SquaredDifference",
        "Neg",
        "Abs",
        "Erf",
        "Erfc",
        "Pow",
        "BiasAdd",
        "Softplus",
        "Softsign",
        "Reciprocal",
        "Inv",
        "Sin",
        "Cos",
        "Floor",
        "Ceil",
        "Round",
        "Sign",
        "FloorDiv",
        "FloorMod",
        "Mod",
        "Greater",
        "GreaterEqual",
        "Less",
        "LessEqual",
        "Equal",
        "NotEqual",
        "LogicalAnd",
        "LogicalOr",
        "LogicalNot",
        "Gelu",
        "Swish",
        "ClipByValue",
        "Select",
        "SelectV2",
    }
)
REDUCTIONS = frozenset(
    {
        "Sum",
        "Mean",
        "Max",
        "Min",
        "Prod",
        "ArgMax",
        "ArgMin",
        "All",
        "Any",
        "EuclideanNorm",
    }
)
PER_ELEMENT = {
    "Rsqrt": 2,  # a square root and a division, as TensorFlow's own FLOP statistics count it
    "Softmax": 5,
    "LogSoftmax": 5,
    "FusedBatchNorm": 2,
    "FusedBatchNormV2": 2,
    "FusedBatchNormV3": 2,
    "AddN": 1,
}
POOLING = frozenset({"MaxPool", "AvgPool", "MaxPoolV2", "MaxPool3D", "AvgPool3D"})
CONTRACTIONS = frozenset(
    {
        "Conv2D",
        "Conv3D",
        "DepthwiseConv2dNative",
        "Conv2DBackpropInput",
        "MatMul",
        "BatchMatMul",
        "BatchMatMulV2",
        "BatchMatMulV3",
        "Einsum",
    }
)
COST_COLUMNS = ["name", "op", "flops", "bytes", "members"]


def _elements(shape: Sequence[int] | None) -> float:
    if shape is None or any(d < 0 for d in shape):
        return math.nan
    return float(math.prod(shape))


def tensor_bytes(shape: Sequence[int] | None, dtype: str) -> float:
    return _elements(shape) * DTYPE_BYTES.get(dtype, 0)


def _einsum_flops(equation: str, shapes: Sequence[Sequence[int] | None], out: float) -> float:
    inputs, _, output = equation.replace(" ", "").partition("->")
    terms = inputs.split(",")
    if len(terms) == 1:
        return _elements(shapes[0])
    sizes: dict[str, int] = {}
    for term, shape in zip(terms, shapes, strict=False):
        if shape is None or "." in term or len(term) != len(shape):
            return math.nan
        sizes.update(zip(term, shape, strict=True))
    contracted = [sizes[c] for c in set("".join(terms)) - set(output)]
    return 2.0 * out * float(math.prod(contracted))


def op_flops(
    op: str, in_shapes: Sequence[Any], out_shapes: Sequence[Any], attrs: Mapping[str, Any]
) -> float:
    """FLOPs of one execution of `op` with these shapes (see the module doc)."""
    out = _elements(out_shapes[0]) if out_shapes else 0.0
    shapes = [list(s) if s is not None else None for s in in_shapes]

    def dim(i: int, axis: int) -> float:
        s = shapes[i] if i < len(shapes) else None
        return math.nan if s is None or s[axis] < 0 else float(s[axis])

    if op in ("Conv2D", "Conv3D"):  # filter [k..., in, out]
        f = shapes[1]
        return 2.0 * out * (_elements(f[:-1]) if f is not None else math.nan)
    if op == "DepthwiseConv2dNative":  # filter [kh, kw, in, multiplier]
        return 2.0 * out * dim(1, 0) * dim(1, 1)
    if op == "Conv2DBackpropInput":  # (sizes, filter [kh, kw, out_ch, in_ch], out_backprop)
        return 2.0 * _elements(shapes[2]) * dim(1, 0) * dim(1, 1) * dim(1, 2)
    if op == "MatMul":
        return 2.0 * out * dim(0, 0 if attrs.get("transpose_a") else 1)
    if op.startswith("BatchMatMul"):
        return 2.0 * out * dim(0, -2 if attrs.get("adj_x") else -1)
    if op == "Einsum":
        return _einsum_flops(str(attrs.get("equation", "")), shapes, out)
    if op in ELEMENTWISE and op not in PER_ELEMENT:
        return out
    if op in REDUCTIONS:
        return _elements(shapes[0]) if shapes else math.nan
    if op in PER_ELEMENT:
        per = PER_ELEMENT[op] * (max(len(shapes) - 1, 1) if op == "AddN" else 1)
        return per * out
    if op in POOLING:
        window = attrs.get("ksize")
        return out * (float(math.prod(window)) if window else math.nan)
    return 0.0


def _input_bytes(row: Any) -> list[float]:
    return [tensor_bytes(s, d) for s, d in zip(row.input_shapes, row.input_dtypes, strict=False)]


def _output_bytes(row: Any) -> float:
    return float(
        sum(tensor_bytes(s, d) for s, d in zip(row.output_shapes, row.output_dtypes, strict=False))
    )


def op_costs(ops: pd.DataFrame) -> pd.DataFrame:
    """Per graph node: `flops` and `bytes` of running it on its own (see the module doc)."""
    rows = []
    for r in ops.itertuples(index=False):
        moves = r.op not in NO_KERNEL_OPS and r.op not in ("Placeholder", "VarHandleOp")
        flops = op_flops(r.op, r.input_shapes, r.output_shapes, r.attrs or {})
        moved = float(sum(_input_bytes(r)) + _output_bytes(r)) if moves else 0.0
        rows.append(
            {"name": r.name, "op": r.op, "flops": flops, "bytes": moved, "members": [r.name]}
        )
    return pd.DataFrame(rows, columns=COST_COLUMNS)


def _producer(tensor: str) -> str:
    return re.sub(r":\d+$", "", tensor.lstrip("^"))


def executed_costs(ops: pd.DataFrame, executed: Mapping[str, str]) -> pd.DataFrame:
    """Costs of the ops that ran: `executed` maps node name -> the type it ran as. A node that
    did not run is added to the fused op that ran in its place (see the module doc)."""
    by_name = {r.name: r for r in ops.itertuples(index=False)}
    consumers: dict[str, list[str]] = {}
    for r in by_name.values():
        for t in r.inputs:
            consumers.setdefault(_producer(t), []).append(r.name)
    fused = {n for n, t in executed.items() if n in by_name and by_name[n].op != t}
    groups: dict[str, list[str]] = {n: [n] for n in executed if n in by_name}
    for name, r in by_name.items():
        if (
            name in executed
            or r.op in NO_KERNEL_OPS
            or op_flops(r.op, r.input_shapes, r.output_shapes, r.attrs or {}) == 0.0
        ):
            continue
        current, seen = name, 0
        while current not in executed and len(consumers.get(current, [])) == 1 and seen < 8:
            current, seen = consumers[current][0], seen + 1
        if current in fused:
            groups[current].append(name)
    rows = []
    for name, members in groups.items():
        inside = set(members)
        flops = 0.0
        moved = 0.0
        for m in members:
            r = by_name[m]
            flops += op_flops(r.op, r.input_shapes, r.output_shapes, r.attrs or {})
            for t, b in zip(r.inputs, _input_bytes(r), strict=False):
                if _producer(t) not in inside:
                    moved += b
        anchor = by_name[name]
        moved += _output_bytes(anchor)
        if len(members) == 1 and anchor.op in NO_KERNEL_OPS:
            moved = 0.0
        rows.append(
            {"name": name, "op": executed[name], "flops": flops, "bytes": moved, "members": members}
        )
    return pd.DataFrame(rows, columns=COST_COLUMNS)


def executed_types(op_spans: pd.DataFrame) -> dict[str, str]:
    """Node name -> the type it ran as, from a profile's op spans."""
    return dict(zip(op_spans.name, op_spans.type, strict=True))


def total(costs: pd.DataFrame, column: str, names: Iterable[str] | None = None) -> float:
    """Sum of a cost column (over `names` if given), NaN-free."""
    frame = costs if names is None else costs[costs.name.isin(list(names))]
    return float(np.nansum(frame[column].to_numpy(dtype=float)))
