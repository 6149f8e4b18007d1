"""Where intermediates that cross a stage live: an on-chip row buffer, or recomputation.

A per-element value computed in stage L and read again in a later stage is either kept in a
block-local buffer (shared memory on GPU, a row buffer on CPU) or recomputed from its inputs.
Cheap values are recomputed; expensive ones are buffered while the block's buffers fit the
budget; when they do not, the *shrink* step turns the cheapest buffered values back into
recomputation until they fit (FusionStitching's 20 KB rule).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tf_stitch.fusion.decision import Decision, allow, forbid
from tf_stitch.fusion.layout import Layout, data_inputs
from tf_stitch.fusion.op_kinds import op_spec
from tf_stitch.graph.ir import Graph, Node, TensorRef

DEFAULT_BUDGET_BYTES = 20 * 1024
# A value whose recomputation costs at most this much (see op_kinds costs) is recomputed.
RECOMPUTE_MAX_COST = 4
_ITEMSIZE = {"float32": 4, "bool": 1}


@dataclass
class MemoryPlan:
    budget: int
    buffered: dict[TensorRef, int] = field(default_factory=dict)  # value -> bytes per block
    decisions: dict[TensorRef, Decision] = field(default_factory=dict)
    bytes_before_shrink: int = 0

    @property
    def bytes_per_block(self) -> int:
        return sum(self.buffered.values())

    def __str__(self) -> str:
        if not self.decisions:
            return "no value crosses a stage"
        parts = [
            f"{ref}: {'buffer' if d.ok else 'recompute'} ({d.reason})"
            for ref, d in self.decisions.items()
        ]
        sizes = f"{self.bytes_per_block} B on chip per block"
        if self.bytes_before_shrink != self.bytes_per_block:
            sizes += f" ({self.bytes_before_shrink} B before shrink, budget {self.budget} B)"
        return f"{sizes}; " + "; ".join(parts)


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
        return plan
    row_elems = _static_row_elements(layout)
    costs = {ref: _recompute_cost(graph, ref, layout, {n.name for n in nodes}) for ref in crossing}
    for ref in crossing:
        cost = costs[ref]
        if cost <= RECOMPUTE_MAX_COST:
            plan.decisions[ref] = forbid(f"cheap: cost {cost}")
        elif row_elems is None:
            plan.decisions[ref] = forbid("row size unknown until run time")
        else:
            plan.buffered[ref] = row_elems * _ITEMSIZE.get(graph.info(ref).dtype, 4)
            plan.decisions[ref] = allow(f"cost {cost}, {plan.buffered[ref]} B")
    plan.bytes_before_shrink = plan.bytes_per_block
    # Shrink: recompute the cheapest buffered values until the block fits the budget.
    for ref in sorted(plan.buffered, key=lambda r: costs[r]):
        if plan.bytes_per_block <= budget:
            break
        size = plan.buffered.pop(ref)
        plan.decisions[ref] = forbid(f"shrunk: {size} B over the {budget} B on-chip budget")
    return plan


def _crossing_values(
    nodes: list[Node], layout: Layout, level: dict[TensorRef, int]
) -> list[TensorRef]:
    names = {n.name for n in nodes}
    out: list[TensorRef] = []
    for node in nodes:
        if layout.is_row_level(node.output(0)):
            continue
        for ref in data_inputs(node):
            if ref.node not in names or layout.is_row_level(ref):
                continue
            if level[ref] < level[node.output(0)] and ref not in out:
                out.append(ref)
    return out


def _recompute_cost(graph: Graph, ref: TensorRef, layout: Layout, names: set[str]) -> int:
    node = graph.node(ref.node)
    cost = op_spec(node.op).cost
    for src in data_inputs(node):
        if src.node in names and not layout.is_row_level(src):
            cost += _recompute_cost(graph, src, layout, names)
    return cost


def _static_row_elements(layout: Layout) -> int | None:
    n = 1
    for d in layout.inner:
        if d is None:
            return None
        n *= d
    return n
