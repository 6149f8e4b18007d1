"""The data types of a group's layout, and the helpers the modules building or reading it share.

A `Layout` is a group's iteration domain, its split into outer and inner axes, its kind, and where
each tensor lives: a `Placement` (frame `FULL` or `OUTER`, and the domain axis of each dim) per
tensor, a `SliceSource` per slice or transpose of a group input read in place, a `MatMulTile` per
matmul computed per block of rows, a `GatherSource` per gather, a `ConcatSink` per concatenation
written part by part (layout.py explains each). `LayoutError` is what the analysis raises when a
group has no layout; `check_fits` (a dim on a domain axis) and `broadcast_all` (the domain of an
elementwise group) raise it too, printing sizes as `fmt` does. `data_inputs` are the inputs of a
node that a kernel reads as data (not a reduction's axes, a concatenation's axis, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from tf_stitch.fusion.dim_relations import Dim
from tf_stitch.fusion.op_kinds import OpKind, op_spec
from tf_stitch.fusion.operand_segments import Segment
from tf_stitch.graph.ir import Node, TensorRef

Dims = tuple[int | None, ...]
Symbols = tuple[Dim | None, ...]  # the symbol of each unknown size (None where it is known)


class Frame(StrEnum):
    """Which axes of the domain a tensor's dims run along."""

    FULL = "full"  # all of them (a tensor computed per element)
    OUTER = "outer"  # the outer ones only (a reduction's result: one value per row)


FULL, OUTER = Frame.FULL, Frame.OUTER


class LayoutKind(StrEnum):
    """How a group's units of work cover its domain (each prints as its value: "row", ...)."""

    LOOP = "loop"  # elementwise: any split of the domain
    ROW = "row"  # reductions over the inner axes: a unit is a row
    COLUMN = "column"  # reductions over outer axes: a unit is a chunk of columns
    ATTENTION = "attention"  # one attention: a unit is a block of query rows


@dataclass(frozen=True)
class Placement:
    frame: Frame
    dims: Dims
    axes: tuple[int, ...]

    def broadcast_axes(self, domain: Dims) -> set[int]:
        """Domain axes this tensor does not vary along."""
        varying = {a for a, d in zip(self.axes, self.dims, strict=True) if d != 1}
        return {a for a in range(len(domain)) if a not in varying or domain[a] == 1}


@dataclass(frozen=True)
class SliceSource:
    """Where a Slice in the group reads from: a group input, its shape, the window's begin,
    and the domain axis of each of its dims (-1 for a dim the window cuts to one element: the
    slice is placed without it, so `x[:, t]`-style windows need no reshape around them)."""

    tensor: TensorRef
    dims: Dims
    begin: tuple[int, ...]
    axes: tuple[int, ...]
    window: Dims


@dataclass(frozen=True)
class MatMulTile:
    """A MatMul computed per block of rows: `a` [M, k] @ `b` [k, n], both group inputs. The
    left operand is read as `segments` (their widths sum to k): through the concatenations
    along columns, slices and views that built it, which then need not run."""

    node: str
    a: TensorRef
    b: TensorRef
    k: int
    n: int
    segments: tuple[Segment, ...]
    row_dims: int = 1  # dims of the result that are rows (a BatchMatMulV2's [B, T, n]: 2)


@dataclass(frozen=True)
class GatherSource:
    """A GatherV2 in the group: each unit of work reads one row of `table` (the inner axes),
    the row that `indices` (placed on the outer axes) names."""

    table: TensorRef
    indices: TensorRef
    rows: int  # the table's rows (indices must be in [0, rows))
    row_elements: int
    # `indices` are the raw ids of Keras' `take`, which adds `rows` to negative ones first
    # (where(ids < 0, ids + rows, ids)): the kernel wraps them itself
    wrap: bool = False


@dataclass(frozen=True)
class ConcatSink:
    """A ConcatV2 of equal parts: the kernel writes part k at offset k * width (the elements
    of a part from the concatenation's axis on) from each element's place in the output;
    nothing in the kernel reads the concatenation."""

    parts: tuple[TensorRef, ...]
    width: int


@dataclass
class Layout:
    domain: Dims
    split: int
    kind: LayoutKind
    placements: dict[TensorRef, Placement] = field(default_factory=dict)
    # Slice outputs of the group: read in place from their (external) source tensor.
    slices: dict[TensorRef, SliceSource] = field(default_factory=dict)
    # MatMul outputs computed per block of rows into on-chip tiles.
    tiles: dict[TensorRef, MatMulTile] = field(default_factory=dict)
    # GatherV2 outputs, read from their table's rows.
    gathers: dict[TensorRef, GatherSource] = field(default_factory=dict)
    # ConcatV2 outputs, written part by part.
    concats: dict[TensorRef, ConcatSink] = field(default_factory=dict)

    @property
    def rank(self) -> int:
        return len(self.domain)

    @property
    def inner(self) -> Dims:
        return self.domain[self.split :]

    def is_row_level(self, ref: TensorRef) -> bool:
        """True if the value is one scalar per row (it does not vary along inner axes)."""
        p = self.placements[ref]
        if p.frame == OUTER:
            return True
        inner_axes = set(range(self.split, self.rank))
        return inner_axes <= p.broadcast_axes(self.domain)


class LayoutError(Exception):
    """Raised inside the analysis; turned into a forbid decision at the boundary."""


def data_inputs(node: Node) -> list[TensorRef]:
    spec = op_spec(node.op)
    if spec.kind is OpKind.ELEMENTWISE:
        return list(node.inputs)
    if spec.kind is OpKind.CONCAT:
        return list(node.inputs[:-1])
    return list(node.inputs[: spec.data_inputs])


def check_fits(ref: TensorRef, dim: int | None, axis: int | None) -> None:
    if dim == 1 or dim == axis:
        return
    raise LayoutError(
        f"{ref}: a dimension of size {_d(dim)} does not fit a domain axis of {_d(axis)}"
    )


def broadcast_all(shapes: list[tuple[TensorRef, Dims, Symbols]]) -> tuple[Dims, Symbols]:
    """numpy broadcasting of all shapes, and the symbols of the unknown sizes; an unknown size
    meets only 1 or unknown sizes of its own symbol."""
    rank = max((len(s) for _, s, _ in shapes), default=0)
    out: list[int | None] = [1] * rank
    symbols: list[Dim | None] = [None] * rank
    known_from: list[TensorRef | None] = [None] * rank
    for ref, shape, shape_symbols in shapes:
        for i, (d, symbol) in enumerate(zip(shape, shape_symbols, strict=True)):
            a = rank - len(shape) + i
            if d == 1 or (d == out[a] and symbol == symbols[a]):
                continue
            if out[a] == 1:
                out[a], symbols[a], known_from[a] = d, symbol, ref
                continue
            if d is None and out[a] is None:
                raise LayoutError(
                    f"{ref} and {known_from[a]} have unknown sizes the graph does not prove equal"
                )
            raise LayoutError(
                f"{ref} has size {_d(d)} where {known_from[a]} has {_d(out[a])}: "
                + ("the broadcast is ambiguous" if None in (d, out[a]) else "they do not broadcast")
            )
    return tuple(out), tuple(symbols)


def same_dims(a: Dims, b: Dims) -> bool:
    return len(a) == len(b) and all(x == y for x, y in zip(a, b, strict=True))


def _d(d: int | None) -> str:
    return "?" if d is None else str(d)


def fmt(dims: Dims) -> str:
    return "[" + ",".join(_d(d) for d in dims) + "]"
