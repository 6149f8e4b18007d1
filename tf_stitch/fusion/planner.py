"""FusionStitching's planner: grow groups along the critical path, one legal merge at a time.

Every candidate node starts as its own group. Producer -> consumer edges between candidates are
visited longest-path first; each merge is kept only if the union is legal (one device, no cycle
through nodes outside it, a layout every op accepts, outputs written once). Then siblings are
absorbed (`siblings.py`): groups reading the same tensor, and independent groups of one layer.
Groups with fewer than two compute ops are dropped: there is nothing to stitch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tf_stitch.fusion.attention import find_attention
from tf_stitch.fusion.attention_match import AttentionMatch
from tf_stitch.fusion.cost_model import ROW_GUESS, attention_block_rows
from tf_stitch.fusion.critical_path import critical_path
from tf_stitch.fusion.decision import Decision, Record, RecordKind, Records, allow, forbid
from tf_stitch.fusion.integers import runs_on_the_host
from tf_stitch.fusion.layout import analyze
from tf_stitch.fusion.layout_types import Layout, LayoutKind, data_inputs
from tf_stitch.fusion.legality import (
    NOT_COMPUTE,
    Context,
    group_outputs,
    node_legality,
    only_library_epilogues,
    outputs_legality,
)
from tf_stitch.fusion.library_ops import library_records
from tf_stitch.fusion.loop_heads import loops_started
from tf_stitch.fusion.memory_plan import DEFAULT_BUDGET_BYTES, MemoryPlan, plan_memory
from tf_stitch.fusion.merge import merge_legality
from tf_stitch.fusion.op_kinds import OpKind, op_spec
from tf_stitch.fusion.schedule import Schedule, levels, schedule_of
from tf_stitch.fusion.siblings import merge_siblings
from tf_stitch.fusion.union_find import UnionFind
from tf_stitch.graph.ir import Graph, Node, TensorRef

# Ops that are never candidates and not worth a line in explain().
_QUIET_OPS = frozenset({"Const", "Placeholder", "NoOp", "Identity"})


@dataclass
class PlannerOptions:
    on_chip_budget: int = DEFAULT_BUDGET_BYTES
    min_compute_ops: int = 2
    # False: every node alone (the unfused baseline the GPU check times kernels against).
    merge: bool = True
    # The bytes of one kernel's matmul tiles' right operands together (None: no bound).
    tile_budget: int | None = None
    # Planned for a GPU (the library epilogues TensorFlow fuses there: legality.fused_activations).
    gpu: bool = False


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
    attention: AttentionMatch | None = None  # an attention kernel (fusion/attention.py)

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]


@dataclass
class Plan:
    groups: list[Group] = field(default_factory=list)
    records: Records = field(default_factory=Records)
    # Groups of one elementwise op: nothing to stitch, but a launch to save if one is bundled
    # with other independent kernels (fusion/bundles.py); the others stay TensorFlow ops.
    singles: list[Group] = field(default_factory=list)

    def log(self, subject: str, decision: Decision) -> Decision:
        self.records.append(Record(subject, decision))
        return decision


def plan_groups(graph: Graph, options: PlannerOptions | None = None) -> Plan:
    options = options or PlannerOptions()
    ctx = Context(graph, options.tile_budget, options.gpu)
    plan = Plan()
    order = graph.topological_order()
    attention = find_attention(ctx, plan.log) if options.merge else []
    claimed = {name for match in attention for name in match.members}
    candidates = set()
    for node in order:
        if node.name in claimed:
            continue
        verdict = node_legality(ctx, node)
        if verdict:
            candidates.add(node.name)
        elif node.op not in _QUIET_OPS:
            plan.log(f"node {node.name} ({node.op})", verdict)
    groups = UnionFind(candidates, ctx.late_order)  # creates_cycle's order
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
    changed = options.merge
    while changed:
        changed = False
        for producer, consumer in edges:
            a, b = groups.find(producer), groups.find(consumer)
            if a == b:
                continue
            union = groups.members(a) | groups.members(b)
            verdict = merge_legality(ctx, groups.members(a), groups.members(b), union, groups)
            if verdict and cp.on_path(producer, consumer):
                verdict = allow(f"{verdict.reason}; on the critical path")
            plan.log(f"merge {producer} -> {consumer}", verdict)
            if verdict:
                groups.union(a, b)
                changed = True
    if options.merge:
        merge_siblings(ctx, groups, cp, plan.log)
    for members in sorted(groups.sets(), key=lambda m: min(ctx.order[n] for n in m)):
        group = _finish(ctx, members, len(plan.groups), options, plan)
        if group is not None:
            plan.groups.append(group)
    _expose_read_through(ctx, plan)
    for match in attention:
        plan.groups.append(_attention_group(ctx, match, len(plan.groups), options))
    for i, single in enumerate(plan.singles):
        single.id = len(plan.groups) + i
    plan.records.extend(library_records(ctx, plan.groups, plan.records))
    plan.records.extend(memory_records(plan.groups))
    return plan


def memory_records(groups: list[Group]) -> list[Record]:
    """Each group's memory plan, one record per value that crosses its stages: allowed is kept
    on chip, forbidden is recomputed where it is read."""
    return [
        Record(f"keep {ref} on chip (group {g.id})", decision, RecordKind.MEMORY)
        for g in groups
        for ref, decision in g.memory.decisions.items()
    ]


def _attention_group(
    ctx: Context, match: AttentionMatch, gid: int, options: PlannerOptions
) -> Group:
    """One attention's group: its domain, a block of query rows per unit of work."""
    nodes = sorted((ctx.graph.node(n) for n in match.members), key=lambda n: ctx.order[n.name])
    layout = Layout(match.domain, len(match.batch) + 1, LayoutKind.ATTENTION)
    rows = attention_block_rows(match.domain[len(match.batch)])
    _, keys, head, value = (ROW_GUESS if d is None else d for d in match.domain[-4:])
    on_chip = 4 * (rows * head + head * keys + keys * value + rows * keys + rows * value)
    memory = MemoryPlan(options.on_chip_budget, block_rows=rows, tile_bytes=on_chip)
    inputs = list(dict.fromkeys(ref for ref, _ in match.leaves))
    return Group(gid, nodes, layout, schedule_of(layout), {}, memory, inputs, [match.output], match)


def _expose_read_through(ctx: Context, plan: Plan) -> None:
    """A matmul tile reads its left operand in place, through concatenations and slices that
    then need not run: a tensor it reads that another group computes must be an output of that
    group (its concatenation may be written by that kernel, not the tensor itself). Where that
    output cannot be written, the reading group stays TensorFlow ops."""
    owner = {name: g for g in plan.groups for name in g.names}
    for reader in list(plan.groups):
        reads = [s.tensor for t in reader.layout.tiles.values() for s in t.segments]
        for ref in reads:
            group = owner.get(ref.node)
            if group is None or group is reader or ref in group.outputs:
                continue
            verdict = outputs_legality(group.layout, [*group.outputs, ref])
            if not verdict:
                plan.groups.remove(reader)
                plan.log(f"group of {reader.nodes[0].name}", verdict)
                break
            group.outputs.append(ref)


def _finish(
    ctx: Context, members: set[str], gid: int, options: PlannerOptions, plan: Plan
) -> Group | None:
    nodes = sorted((ctx.graph.node(n) for n in members), key=lambda n: ctx.order[n.name])
    # Matmuls do not count: a kernel of one matmul and its bias add is what the library call
    # is, and TensorFlow's fused library call is the faster of the two (oneDNN's GEMM at a
    # training batch: a Keras MLP's step 1.38x TensorFlow's with its dense layers as tiles);
    # a kernel of several matmuls (siblings reading one input) saves launches.
    compute = [n for n in nodes if op_spec(n.op).kind not in NOT_COMPUTE]
    tiles = sum(op_spec(n.op).kind is OpKind.MATMUL for n in nodes)
    if compute and tiles <= 1 and only_library_epilogues(ctx, compute):
        plan.log(
            f"group of {nodes[0].name}",
            forbid(
                "only bias adds (and activations) of matmuls or convolutions: TensorFlow "
                "fuses those into the library call"
            ),
        )
        return None
    if ctx.gpu and compute and all(runs_on_the_host(ctx.graph, n) for n in compute):
        plan.log(
            f"group of {nodes[0].name}",
            forbid(
                "only int32 ops: on a GPU TensorFlow runs them on the host, launching no "
                "kernel (their arguments stay in host memory)"
            ),
        )
        return None
    # One elementwise op: nothing to stitch, but a candidate for a bundle (plan.singles).
    single = len(compute) == 1 and not tiles and options.merge and _static_elementwise(compute[0])
    if len(compute) < options.min_compute_ops:
        if len(nodes) > 1 or compute:
            plan.log(
                f"group of {nodes[0].name}", forbid("fewer than two compute ops: nothing to stitch")
            )
        if not single:
            return None
    layout = analyze(ctx.graph, members, ctx.order, ctx.dims, ctx.tile_budget)
    group = (
        layout
        if isinstance(layout, Decision)
        else _group(ctx, members, nodes, gid, layout, options)
    )
    if isinstance(group, Decision):  # a single node never checked by a merge, or loops
        if len(compute) >= options.min_compute_ops:
            plan.log(f"group of {nodes[0].name}", group)
        return None
    if len(compute) < options.min_compute_ops:
        plan.singles.append(group)
        return None
    return group


def _static_elementwise(node: Node) -> bool:
    """An elementwise op whose result's shape is known (a bundle's candidate member)."""
    shape = node.outputs[0].shape if node.outputs else None
    return (
        op_spec(node.op).kind is OpKind.ELEMENTWISE
        and shape is not None
        and all(isinstance(d, int) for d in shape)
    )


def _group(
    ctx: Context,
    members: set[str],
    nodes: list[Node],
    gid: int,
    layout: Layout,
    options: PlannerOptions,
) -> Group | Decision:
    """The group of `members` laid out as `layout`, or why not (its outputs start several
    loops)."""
    level = levels(ctx.graph, nodes)
    memory = plan_memory(ctx.graph, nodes, layout, level, options.on_chip_budget)
    inputs: list[TensorRef] = []
    for node in nodes:
        for ref in data_inputs(node):
            if ref.node not in members and ref not in inputs:
                inputs.append(ref)
    for gather in layout.gathers.values():  # raw ids a gather wraps itself
        if gather.indices not in inputs:
            inputs.append(gather.indices)
    outputs = group_outputs(ctx, members)
    loops = loops_started(ctx, members, outputs)
    if len(loops) > 1:
        return forbid(
            f"its outputs start {len(loops)} loops ({', '.join(loops[:3])}): TensorFlow "
            "runs them on separate threads only if separate ops feed them"
        )
    return Group(gid, nodes, layout, schedule_of(layout), level, memory, inputs, outputs)
