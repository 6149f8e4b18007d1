"""Where intermediates that cross a stage live: an on-chip row buffer, or recomputation.

A per-element value computed in stage L and read again in a later stage is either kept in a
block-local buffer (shared memory on GPU, a row buffer on CPU) or recomputed from its inputs.
Cheap values are recomputed; expensive ones are buffered while the block's buffers fit the
budget; when they do not, the *shrink* step turns the cheapest buffered values back into
recomputation until they fit (FusionStitching's 20 KB rule).

A column kernel runs COLUMN_LANES units at once, so its buffers hold that many rows.

Matmul tiles (layout.py) take `block_rows x n` floats each: a block computes that many rows of
every tile at once (reusing each loaded row of the right operand across them), as many as fit
the budget next to the buffers, at most MAX_BLOCK_ROWS.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tf_stitch.fusion.cost_model import COLUMN_LANES
from tf_stitch.fusion.decision import Decision, allow, forbid
from tf_stitch.fusion.layout_types import Layout, LayoutKind, data_inputs
from tf_stitch.fusion.op_kinds import buffer_itemsize, op_spec
from tf_stitch.graph.ir import Graph, Node, TensorRef

DEFAULT_BUDGET_BYTES = 20 * 1024
# A value whose recomputation costs at most this much (see op_kinds costs) is recomputed.
RECOMPUTE_MAX_COST = 4
# Rows of a matmul tile computed together: the register block of the CPU micro-kernel.
MAX_BLOCK_ROWS = 6


@dataclass
class MemoryPlan:
    budget: int
    buffered: dict[TensorRef, int] = field(default_factory=dict)  # value -> bytes per block
    decisions: dict[TensorRef, Decision] = field(default_factory=dict)
    bytes_before_shrink: int = 0
    block_rows: int = 1  # rows per block (more than one only for matmul tiles)
    tile_bytes: int = 0  # bytes of matmul tiles per block

    @property
    def bytes_per_block(self) -> int:
        return sum(self.buffered.values()) + self.tile_bytes

    def __str__(self) -> str:
        tiles = (
            f"matmul tiles of {self.block_rows} rows: {self.tile_bytes} B on chip per block"
            if self.tile_bytes
            else ""
        )
        if not self.decisions:
            return tiles or "no value crosses a stage"
        parts = [
            f"{ref}: {'buffer' if d.ok else 'recompute'} ({d.reason})"
            for ref, d in self.decisions.items()
        ]
        sizes = f"{self.bytes_per_block} B on chip per block"
        if self.bytes_before_shrink != self.bytes_per_block:
            sizes += f" ({self.bytes_before_shrink} B before shrink, budget {self.budget} B)"
        return f"{sizes}; " + "; ".join(parts + ([tiles] if tiles else []))


def plan_memory(
    graph: Graph,
    nodes: list[Node],
    layout: Layout,
    level: dict[TensorRef, int],
    budget: int = DEFAULT_BUDGET_BYTES,
) -> MemoryPlan:
    """Decides buffer-or-recompute for each per-element value read in a later stage."""
    plan = MemoryPlan(budget)
    crossing = _crossing_values(nodes, layout, level)
    if not crossing:
        _plan_tiles(plan, layout)
        return plan
    row_elems = _static_row_elements(layout)
    if row_elems is not None and layout.kind is LayoutKind.COLUMN:
        row_elems *= COLUMN_LANES
    costs = {ref: _recompute_cost(graph, ref, layout, {n.name for n in nodes}) for ref in crossing}
    for ref in crossing:
        cost = costs[ref]
        if cost <= RECOMPUTE_MAX_COST:
            plan.decisions[ref] = forbid(f"cheap: cost {cost}")
        elif row_elems is None:
            plan.decisions[ref] = forbid("row size unknown until run time")
        else:
            plan.buffered[ref] = row_elems * buffer_itemsize(graph.info(ref).dtype)
            plan.decisions[ref] = allow(f"cost {cost}, {plan.buffered[ref]} B")
    plan.bytes_before_shrink = plan.bytes_per_block
    # Shrink: recompute the cheapest buffered values until the block fits the budget (with
    # room for one row of each matmul tile).
    room = budget - _tile_row_bytes(layout)
    for ref in sorted(plan.buffered, key=lambda r: costs[r]):
        if plan.bytes_per_block <= room:
            break
        size = plan.buffered.pop(ref)
        plan.decisions[ref] = forbid(f"shrunk: {size} B over the {budget} B on-chip budget")
    _plan_tiles(plan, layout)
    return plan


def _tile_row_bytes(layout: Layout) -> int:
    return sum(t.n * 4 for t in layout.tiles.values())


def _plan_tiles(plan: MemoryPlan, layout: Layout) -> None:
    """Rows per block: as many as fit the budget next to the buffers (at least one)."""
    row_bytes = _tile_row_bytes(layout)
    if not row_bytes:
        return
    room = plan.budget - sum(plan.buffered.values())
    plan.block_rows = max(1, min(MAX_BLOCK_ROWS, room // row_bytes))
    plan.tile_bytes = plan.block_rows * row_bytes
    if not plan.decisions:
        plan.bytes_before_shrink = plan.bytes_per_block
    else:
        plan.bytes_before_shrink += plan.tile_bytes


def _crossing_values(
    nodes: list[Node], layout: Layout, level: dict[TensorRef, int]
) -> list[TensorRef]:
    names = {n.name for n in nodes}
    out: list[TensorRef] = []
    for node in nodes:
        result = node.output(0)
        if result in layout.tiles or result in layout.concats or layout.is_row_level(result):
            continue
        for ref in data_inputs(node):
            if ref.node not in names or ref in layout.tiles or layout.is_row_level(ref):
                continue
            if level[ref] < level[node.output(0)] and ref not in out:
                out.append(ref)
    return out


def _recompute_cost(graph: Graph, ref: TensorRef, layout: Layout, names: set[str]) -> int:
    node = graph.node(ref.node)
    cost = op_spec(node.op).cost
    for src in data_inputs(node):
        if src.node in names and src not in layout.tiles and not layout.is_row_level(src):
            cost += _recompute_cost(graph, src, layout, names)
    return cost


def _static_row_elements(layout: Layout) -> int | None:
    n = 1
    for d in layout.inner:
        if d is None:
            return None
        n *= d
    return n
