"""stitch: plans the fusion groups (FusionStitching) and marks their members.

Each member gets a `_stitch_group` attribute (visible in dumps); the plan, with every decision
and its reason, goes to the context for `outline` and `explain()`.
"""

from __future__ import annotations

from tf_stitch.fusion.planner import PlannerOptions, plan_groups
from tf_stitch.graph.ir import Graph
from tf_stitch.passes.base import PassContext, graph_pass

GROUP_ATTR = "_stitch_group"


@graph_pass("stitch")
def stitch(graph: Graph, ctx: PassContext) -> Graph:
    """Groups memory-bound ops along the critical path into stitchable groups."""
    options = PlannerOptions(
        on_chip_budget=ctx.options.on_chip_budget,
        tile_budget=ctx.options.tile_budget,
        gpu=ctx.options.gpu,
    )
    plan = plan_groups(graph, options)
    ctx.plan = plan
    ctx.records.extend(plan.records)
    out = graph.copy()
    for group in plan.groups:
        for name in group.names:
            out.node(name).attrs[GROUP_ATTR] = f"g{group.id}".encode()
    return out
