"""The splits of an elementwise group at which each unit of work reads its inputs well.

A loop group (no reduction) may put any of its domain's axes in the units' rows: at a split, each
input (or window of one) is read along a row not at all, contiguously, periodically (a short
pattern repeated, as a bias is), or in general. `valid_loop_splits` keeps the splits no input
reads in general; the cost model (cost_model.choose_loop_split) chooses among them.
"""

from __future__ import annotations

import math
from enum import StrEnum

from tf_stitch.fusion.cost_model import PERIODIC_ROW_ELEMENTS
from tf_stitch.fusion.layout_types import Dims, Layout, Placement
from tf_stitch.graph.ir import TensorRef


class RowRead(StrEnum):
    """How a unit reads an input along its row."""

    ZERO = "zero"  # one value
    CONTIGUOUS = "contiguous"
    # The same short pattern in every row: a bias of the last axis broadcast over rows longer
    # than it, which the CPU kernel repeats once into a row-long buffer.
    PERIODIC = "periodic"
    GENERAL = "general"


def valid_loop_splits(layout: Layout, inputs: list[TensorRef]) -> list[int]:
    """The splits of an elementwise group at which every input (or window of an input) reads
    its row contiguously, not at all, or periodically (the cost model chooses among them)."""
    return [
        split
        for split in range(layout.rank + 1)
        if all(
            _inner_access(layout.placements[r], layout.domain, split, _cut_axes(layout, r))
            is not RowRead.GENERAL
            for r in inputs
        )
    ]


def _cut_axes(layout: Layout, ref: TensorRef) -> set[int]:
    """Domain axes whose neighbour before them is farther apart in memory than a row-major
    window would be: axes along which the window is narrower than its source, and the axis
    after a source dim the window drops (`x[:, t]` of [B,T,H]: B's rows are T*H apart)."""
    source = layout.slices.get(ref)
    if source is None:
        return set()
    kept = [a for a in source.axes if a >= 0]
    if kept != sorted(kept):  # a transpose: its strides are out of order
        return set(kept)
    cut: set[int] = set()
    dropped = False
    for a, w, s in zip(source.axes, source.window, source.dims, strict=True):
        if a < 0:
            dropped = dropped or s != 1
            continue
        if w != s or dropped:
            cut.add(a)
        dropped = False
    return cut


def _inner_access(p: Placement, domain: Dims, split: int, cut: set[int]) -> RowRead:
    """How a unit reads an input along its row at `split`."""
    inner = [a for a in range(split, len(domain)) if domain[a] != 1]
    bcast = p.broadcast_axes(domain)
    if all(a in bcast for a in inner):
        return RowRead.ZERO
    if all(a not in bcast for a in inner) and not cut & set(inner[1:]):
        return RowRead.CONTIGUOUS
    outer = [a for a in range(split) if domain[a] != 1]
    row = [d for d in (domain[a] for a in inner) if d is not None]
    if all(a in bcast for a in outer) and not cut and len(row) == len(inner):
        periodic = math.prod(row) <= PERIODIC_ROW_ELEMENTS
        return RowRead.PERIODIC if periodic else RowRead.GENERAL
    return RowRead.GENERAL
