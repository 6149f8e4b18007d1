"""Whether two groups may become one: the checks every merge (vertical or sibling) passes."""

from __future__ import annotations

import heapq
import math
from collections import deque

from tf_stitch.fusion.decision import Decision, allow, forbid
from tf_stitch.fusion.layout import analyze
from tf_stitch.fusion.layout_types import fmt
from tf_stitch.fusion.legality import (
    NOT_COMPUTE,
    Context,
    group_outputs,
    only_library_epilogues,
    outputs_legality,
    same_device,
    same_liveness,
)
from tf_stitch.fusion.op_kinds import OpKind, op_spec
from tf_stitch.fusion.union_find import UnionFind

# A matmul's right operand from which oneDNN's GEMM is clearly faster than a tile at a
# training batch (a Keras MLP's 256x256 layers: its step 1.06-1.22x TensorFlow's as tiles).
LIBRARY_GEMM_ELEMENTS = 32 * 1024


def merge_legality(
    ctx: Context, a: set[str], b: set[str], union: set[str], groups: UnionFind
) -> Decision:
    for check in (same_device, same_liveness):
        verdict = check(ctx, sorted(a), sorted(b))
        if not verdict:
            return verdict
    if creates_cycle(ctx, union, groups):
        return forbid("would create a cycle through nodes outside the group")
    verdict = keeps_library_call(ctx, a, b, union)
    if not verdict:
        return verdict
    layout = analyze(ctx.graph, union, ctx.order, ctx.dims, ctx.tile_budget)
    if isinstance(layout, Decision):
        return layout
    verdict = outputs_legality(layout, group_outputs(ctx, union))
    if not verdict:
        return verdict
    return allow(f"{layout.kind} over {fmt(layout.domain)}")


def keeps_library_call(ctx: Context, a: set[str], b: set[str], union: set[str]) -> Decision:
    """A matmul of a large right operand (`LIBRARY_GEMM_ELEMENTS`) with only its bias add and
    activation (TensorFlow's one fused library call: oneDNN's or cuBLAS's GEMM, faster than a
    tile at a training batch) does not take in the ops that only read its results when those
    results are read elsewhere too, so are written out anyway (a training step's ReLU mask,
    read from the activation the next layer reads): the ops go with their other neighbours,
    the matmul stays the library's."""
    for x, y in ((a, b), (b, a)):
        nodes = [ctx.graph.node(n) for n in x]
        kinds = [op_spec(n.op).kind for n in nodes]
        if kinds.count(OpKind.MATMUL) != 1:
            continue
        matmul = nodes[kinds.index(OpKind.MATMUL)]
        weights = ctx.graph.info(matmul.inputs[1]).shape if len(matmul.inputs) > 1 else None
        sizes = [d for d in weights or () if d is not None]
        if not weights or len(sizes) != len(weights) or math.prod(sizes) < LIBRARY_GEMM_ELEMENTS:
            continue  # a small right operand: the tile is as fast, and a launch fewer
        compute = [n for n, k in zip(nodes, kinds, strict=True) if k not in NOT_COMPUTE]
        if not compute or not only_library_epilogues(ctx, compute):
            continue
        if any(op_spec(ctx.graph.node(n).op).kind is OpKind.MATMUL for n in y):
            continue  # several matmuls in one kernel save launches
        read = {r for n in y for r in ctx.graph.node(n).inputs if r.node in x}
        if read and all(any(c not in union for c in ctx.consumers.get(r, [])) for r in read):
            return forbid(
                "keeps a matmul and its fused epilogue one library call: the result read here "
                "is written out for its other readers anyway"
            )
    return allow()


def creates_cycle(ctx: Context, union: set[str], groups: UnionFind) -> bool:
    """True if a path leaves the union and comes back into it. Every other group becomes one
    kernel, so a path that reaches one of its members goes on from all of them.

    Only the window between the union and `limit` is walked: edges go forward in `order`, so
    a path that goes beyond `limit` comes back only through a group that starts at or before
    `limit` and ends after it (reaching a group widens `limit` to its last member; when the
    walk stops, `limit` widens to the last member of every group that starts before it,
    `UnionFind.reach`). Nodes met beyond `limit` wait until it grows past them. Each call
    costs the window, not the graph (a scan of every group per merge made planning
    superlinear in the model's depth)."""
    order, succ = ctx.late_order, ctx.successors
    limit = max(order[n] for n in union)
    spans: dict[str, tuple[int, int] | None] = {}

    def span(name: str) -> tuple[int, int] | None:
        """(first, last) position of the other group `name` belongs to; None if none."""
        if name not in groups.parent:
            return None
        root = groups.find(name)
        if root not in spans:
            members = groups.members(root)
            positions = [order[m] for m in members]
            spans[root] = (min(positions), max(positions)) if len(members) > 1 else None
        return spans[root]

    frontier = deque(s for n in union for s in succ.get(n, ()) if s not in union)
    waiting: list[tuple[int, str]] = []
    seen: set[str] = set()
    while True:
        while frontier:
            name = frontier.popleft()
            if name in seen:
                continue
            group = span(name)
            if order[name] > limit and (group is None or group[0] > limit):
                heapq.heappush(waiting, (order[name], name))
                continue
            seen.add(name)
            if group is not None:
                limit = max(limit, group[1])
                frontier.extend(groups.members(groups.find(name)))
            for s in succ.get(name, ()):
                if s in union:
                    return True
                frontier.append(s)
        if waiting and waiting[0][0] > limit:
            # A path beyond `limit` comes back only through a group that starts before it
            # and ends after it (reached at a later member, it goes on from all of them).
            limit = groups.reach(limit)
        if not waiting or waiting[0][0] > limit:
            return False
        while waiting and waiting[0][0] <= limit:
            frontier.append(heapq.heappop(waiting)[1])
