"""A group's schedule: how its domain is cut into units of work and into stages.

`kind` is `row` (each unit is one row of the outer axes; row reductions end a stage) or `loop`
(elementwise only). `split_dim` separates the outer (parallel) axes from the inner (per-unit)
ones. A value's *level* is the number of reductions on its longest input path: per-element values
of level L are computed in stage L's loop; a reduction of a level-L value accumulates in that
loop and its result (level L+1) is available after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tf_stitch.fusion.layout_types import Dims, Layout, LayoutKind, data_inputs, fmt
from tf_stitch.fusion.op_kinds import OpKind, op_spec
from tf_stitch.graph.ir import Graph, Node, TensorRef


@dataclass(frozen=True)
class Schedule:
    kind: LayoutKind
    split_dim: int
    domain: Dims

    @property
    def units(self) -> Dims:
        """The outer axes: one unit of work (block) per point."""
        return self.domain[: self.split_dim]

    @property
    def row(self) -> Dims:
        return self.domain[self.split_dim :]

    def __str__(self) -> str:
        domain, blocks = fmt(self.domain), fmt(self.units)
        return f"{self.kind}(split_dim={self.split_dim}, domain={domain}, blocks={blocks})"


def schedule_of(layout: Layout) -> Schedule:
    return Schedule(layout.kind, layout.split, layout.domain)


def levels(graph: Graph, nodes: list[Node]) -> dict[TensorRef, int]:
    """Level of every tensor the group computes (`nodes` in topological order)."""
    level: dict[TensorRef, int] = {}
    for node in nodes:
        base = max((level.get(r, 0) for r in data_inputs(node)), default=0)
        if op_spec(node.op).kind is OpKind.REDUCE:
            base += 1
        level[node.output(0)] = base
    return level
