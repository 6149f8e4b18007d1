"""Sibling (multi-output) fusion: groups that read the same tensor, or that sit side by side in
the same layer of the graph, become one kernel with several outputs.

After groups have grown along producer -> consumer edges, two kinds of merges remain:
- *shared input*: the consumers of one tensor (a value used by two regions is read once);
- *same layer*: independent groups whose inputs are all ready at the same depth of the graph
  (AStitch's independent stitching: one launch instead of several, and no path between them is
  lengthened because both would start at the same time anyway).

Same-layer merges are a GPU's: its kernels run one after another on a stream, so a launch saved
is time saved. TensorFlow's CPU executor runs independent ops side by side on its inter-op
threads, and a depth counted in nodes says little about when each group's inputs are ready:
NASNet's cells have five branches of separable convolutions of different sizes, and one kernel
of their five ReLUs held every branch until the slowest was ready (NASNet-Large 1.04x
TensorFlow's latency; 0.99x without those merges). On a CPU only groups too small to be worth a
second core are merged that way (`cost_model.PARALLEL_MIN_CYCLES` together): their dispatch
costs about as much as their work.
Each merge passes the same checks as any other (`merge_legality`): no cycle, one layout.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

from tf_stitch.fusion.cost_model import output_cycles, shares_a_core
from tf_stitch.fusion.critical_path import CriticalPath
from tf_stitch.fusion.decision import Decision, Record, allow, forbid
from tf_stitch.fusion.legality import Context
from tf_stitch.fusion.merge import merge_legality
from tf_stitch.fusion.union_find import UnionFind

Log = Callable[[str, Decision], Decision]
# The reason of a same-layer merge refused on a CPU (a GPU's plan would have made it).
SIDE_BY_SIDE = "on a CPU independent kernels run side by side"


def has_cpu_only_splits(records: Iterable[Record]) -> bool:
    """Whether a plan kept apart groups of one layer that a GPU's plan would merge."""
    return any(not r.decision and r.decision.reason.startswith(SIDE_BY_SIDE) for r in records)


def merge_siblings(ctx: Context, groups: UnionFind, cp: CriticalPath, log: Log) -> None:
    """Merges sibling groups in place, shared-input siblings first."""
    for node in ctx.graph.topological_order():
        if node.op == "Const":  # reading the same constant is no reason to be one kernel
            continue
        for i in range(len(node.outputs)):
            ref = node.output(i)
            users = [u for u in ctx.consumers.get(ref, []) if u in groups.parent]
            _merge_all(ctx, groups, users, f"shares {ref}", log)
    by_layer: dict[tuple[int, str], list[str]] = defaultdict(list)
    for members in sorted(groups.sets(), key=lambda m: min(ctx.order[n] for n in m)):
        name = min(members, key=ctx.order.__getitem__)
        by_layer[(_layer(ctx, members, cp), ctx.graph.node(name).device)].append(name)
    for (layer, _), names in by_layer.items():
        if not ctx.gpu:
            names = _small_on_a_cpu(ctx, groups, names, layer, log)
        _merge_all(ctx, groups, names, f"independent, same layer {layer}", log)


def _small_on_a_cpu(
    ctx: Context, groups: UnionFind, names: list[str], layer: int, log: Log
) -> list[str]:
    """The groups of `names` small enough to share a kernel on a CPU (see the module's doc);
    the others are logged as refused."""
    if len(names) < 2:
        return names
    cycles = {n: _cycles(ctx, groups.members(groups.find(n))) for n in names}
    small, total = [], 0
    for name in names:
        if shares_a_core([total, cycles[name]]):
            small.append(name)
            total += cycles[name]
        else:
            log(f"merge siblings {name} (same layer {layer})", side_by_side(cycles[name]))
    return small


def side_by_side(cycles: int) -> Decision:
    """The refusal of a same-layer merge (or bundle) on a CPU."""
    return forbid(f"{SIDE_BY_SIDE} ({cycles:,} cycles of work, more than a dispatch saves)")


def _cycles(ctx: Context, members: set[str]) -> int:
    return output_cycles(info.shape for n in members for info in ctx.graph.node(n).outputs)


def _merge_all(ctx: Context, groups: UnionFind, names: list[str], why: str, log: Log) -> None:
    """Tries to merge the groups of `names` into the first one, in order."""
    roots: list[str] = []
    for n in names:
        root = groups.find(n)
        if root not in roots:
            roots.append(root)
    for other in roots[1:]:
        a, b = groups.find(roots[0]), groups.find(other)
        if a == b:
            continue
        union = groups.members(a) | groups.members(b)
        verdict = merge_legality(ctx, groups.members(a), groups.members(b), union, groups)
        if verdict:
            verdict = allow(f"sibling ({why}); {verdict.reason}")
        log(f"merge siblings {_label(ctx, a, groups)} + {_label(ctx, b, groups)}", verdict)
        if verdict:
            groups.union(a, b)


def _layer(ctx: Context, members: set[str], cp: CriticalPath) -> int:
    """How deep in the graph the group's inputs become ready (its earliest start)."""
    depth = 0
    for name in members:
        for ref in ctx.graph.node(name).inputs:
            if ref.node not in members:
                depth = max(depth, cp.depth[ref.node])
    return depth


def _label(ctx: Context, root: str, groups: UnionFind) -> str:
    return min(groups.members(root), key=ctx.order.__getitem__)
