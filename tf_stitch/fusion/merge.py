"""Whether two groups may become one: the checks every merge (vertical or sibling) passes."""

from __future__ import annotations

from collections import deque

from tf_stitch.fusion.decision import Decision, allow, forbid
from tf_stitch.fusion.layout import analyze, fmt
from tf_stitch.fusion.legality import (
    Context,
    group_outputs,
    outputs_legality,
    same_device,
    same_liveness,
)
from tf_stitch.fusion.union_find import UnionFind


def merge_legality(
    ctx: Context, a: set[str], b: set[str], union: set[str], groups: UnionFind
) -> Decision:
    for check in (same_device, same_liveness):
        verdict = check(ctx, sorted(a), sorted(b))
        if not verdict:
            return verdict
    if creates_cycle(ctx, union, groups):
        return forbid("would create a cycle through nodes outside the group")
    layout = analyze(ctx.graph, union, ctx.order, ctx.dims, ctx.tile_budget)
    if isinstance(layout, Decision):
        return layout
    verdict = outputs_legality(layout, group_outputs(ctx, union))
    if not verdict:
        return verdict
    return allow(f"{layout.kind} over {fmt(layout.domain)}")


def creates_cycle(ctx: Context, union: set[str], groups: UnionFind) -> bool:
    """True if a path leaves the union and comes back into it. Every other group becomes one
    kernel, so a path that reaches one of its members goes on from all of them."""
    others = [m for m in groups.sets() if len(m) > 1 and m.isdisjoint(union)]
    owner = {n: m for m in others for n in m}
    # Nothing after `limit` leads back: edges go forward in `order`, and `limit` is widened to
    # cover every group that starts before it, so a group reached after it lies wholly after.
    limit = max(ctx.order[n] for n in union)
    spans = sorted((min(o), max(o)) for o in ([ctx.order[n] for n in m] for m in others))
    for lo, hi in spans:
        if lo > limit:
            break
        limit = max(limit, hi)
    succ = ctx.successors
    frontier = deque(s for n in union for s in succ.get(n, ()) if s not in union)
    seen: set[str] = set()
    while frontier:
        name = frontier.popleft()
        if name in seen or ctx.order[name] > limit:
            continue
        seen.add(name)
        frontier.extend(owner.get(name, ()))
        for s in succ.get(name, ()):
            if s in union:
                return True
            frontier.append(s)
    return False
