"""stitch: plans the fusion groups (FusionStitching) and hands the plan to `outline` (ctx.plan),
with every decision and its reason to the context's records (explain()). The graph itself is
not changed: the groups are in the plan (and in a dump's plan.txt)."""

from __future__ import annotations

from tf_stitch.fusion.planner import PlannerOptions, plan_groups
from tf_stitch.graph.ir import Graph
from tf_stitch.passes.base import PassContext, graph_pass


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
    return graph.copy()
