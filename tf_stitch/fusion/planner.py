"""FusionStitching's planner: grow groups along the critical path, one legal merge at a time.

Every candidate node starts as its own group. Producer -> consumer edges between candidates are
visited longest-path first; each merge is kept only if the union is legal (one device, no cycle
through nodes outside it, a layout every op accepts, outputs written once). Groups with fewer
than two compute ops are dropped: there is nothing to stitch.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from tf_stitch.fusion.critical_path import critical_path
from tf_stitch.fusion.decision import Decision, Record, allow, forbid
from tf_stitch.fusion.layout import Layout, analyze, data_inputs, fmt
from tf_stitch.fusion.legality import (
    Context,
    group_outputs,
    node_legality,
    outputs_legality,
    same_device,
)
from tf_stitch.fusion.memory_plan import DEFAULT_BUDGET_BYTES, MemoryPlan, plan_memory
from tf_stitch.fusion.op_kinds import OpKind, op_spec
from tf_stitch.fusion.schedule import Schedule, levels, schedule_of
from tf_stitch.graph.ir import Graph, Node, TensorRef

# Ops that are never candidates and not worth a line in explain().
_QUIET_OPS = frozenset({"Const", "Placeholder", "NoOp", "Identity"})


@dataclass
class PlannerOptions:
    on_chip_budget: int = DEFAULT_BUDGET_BYTES
    min_compute_ops: int = 2


@dataclass
class Group:
    id: int
    nodes: list[Node]  # topological order
    layout: Layout
    schedule: Schedule
    level: dict[TensorRef, int]
    memory: MemoryPlan
    inputs: list[TensorRef]
    outputs: list[TensorRef]

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]


@dataclass
class Plan:
    groups: list[Group] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)

    def log(self, subject: str, decision: Decision) -> Decision:
        self.records.append(Record(subject, decision))
        return decision


def plan_groups(graph: Graph, options: PlannerOptions | None = None) -> Plan:
    options = options or PlannerOptions()
    ctx = Context(graph)
    plan = Plan()
    order = graph.topological_order()
    candidates = set()
    for node in order:
        verdict = node_legality(ctx, node)
        if verdict:
            candidates.add(node.name)
        elif node.op not in _QUIET_OPS:
            plan.log(f"node {node.name} ({node.op})", verdict)
    groups = _UnionFind(candidates)
    cp = critical_path(graph, order)
    edges = sorted(
        (
            (r.node, n.name)
            for n in order
            if n.name in candidates
            for r in n.inputs
            if r.node in candidates
        ),
        key=lambda e: (-cp.edge_weight(*e), ctx.order[e[1]]),
    )
    # Refused merges are retried once their neighbourhood has changed, until nothing changes.
    changed = True
    while changed:
        changed = False
        for producer, consumer in edges:
            a, b = groups.find(producer), groups.find(consumer)
            if a == b:
                continue
            union = groups.members(a) | groups.members(b)
            verdict = _merge_legality(ctx, groups.members(a), groups.members(b), union, groups)
            if verdict and cp.on_path(producer, consumer):
                verdict = allow(f"{verdict.reason}; on the critical path")
            plan.log(f"merge {producer} -> {consumer}", verdict)
            if verdict:
                groups.union(a, b)
                changed = True
    for members in groups.sets():
        group = _finish(ctx, members, len(plan.groups), options, plan)
        if group is not None:
            plan.groups.append(group)
    return plan


def _merge_legality(
    ctx: Context, a: set[str], b: set[str], union: set[str], groups: _UnionFind
) -> Decision:
    verdict = same_device(ctx, sorted(a), sorted(b))
    if not verdict:
        return verdict
    if _creates_cycle(ctx, union, groups):
        return forbid("would create a cycle through nodes outside the group")
    layout = analyze(ctx.graph, union, ctx.order)
    if isinstance(layout, Decision):
        return layout
    verdict = outputs_legality(layout, group_outputs(ctx, union))
    if not verdict:
        return verdict
    return allow(f"{layout.kind} over {fmt(layout.domain)}")


def _creates_cycle(ctx: Context, union: set[str], groups: _UnionFind) -> bool:
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


def _finish(
    ctx: Context, members: set[str], gid: int, options: PlannerOptions, plan: Plan
) -> Group | None:
    nodes = sorted((ctx.graph.node(n) for n in members), key=lambda n: ctx.order[n.name])
    compute = [n for n in nodes if op_spec(n.op).kind is not OpKind.RESHAPE]
    if len(compute) < options.min_compute_ops:
        if len(nodes) > 1 or compute:
            plan.log(
                f"group of {nodes[0].name}", forbid("fewer than two compute ops: nothing to stitch")
            )
        return None
    layout = analyze(ctx.graph, members, ctx.order)
    if isinstance(layout, Decision):  # a single node never checked by a merge
        plan.log(f"group of {nodes[0].name}", layout)
        return None
    level = levels(ctx.graph, nodes)
    memory = plan_memory(ctx.graph, nodes, layout, level, options.on_chip_budget)
    inputs: list[TensorRef] = []
    for node in nodes:
        for ref in data_inputs(node):
            if ref.node not in members and ref not in inputs:
                inputs.append(ref)
    outputs = group_outputs(ctx, members)
    return Group(gid, nodes, layout, schedule_of(layout), level, memory, inputs, outputs)


class _UnionFind:
    def __init__(self, items: set[str]) -> None:
        self.parent = {i: i for i in items}
        self._members = {i: {i} for i in items}

    def find(self, x: str) -> str:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        a, b = self.find(a), self.find(b)
        if a == b:
            return
        if len(self._members[a]) < len(self._members[b]):
            a, b = b, a
        self.parent[b] = a
        self._members[a] |= self._members.pop(b)

    def members(self, root: str) -> set[str]:
        return self._members[root]

    def sets(self) -> list[set[str]]:
        return [m for r, m in self._members.items() if self.parent[r] == r]
