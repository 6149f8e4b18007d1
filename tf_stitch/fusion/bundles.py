"""Bundles: independent elementwise kernels of static shapes launched as one (horizontal fusion).

The planner's groups each have one iteration domain, so independent groups of different shapes
stay separate kernels even where nothing orders them: the optimizer's update of every variable
of a training step (one group per variable shape), the rescaled filters of every convolution.
XLA fuses such loops horizontally and AStitch stitches independent ops into one launch; here
the groups whose kernels run one thread per element (no reductions, no row buffers, no tiles,
no gathers, every size known: `codegen/bundle.py` runs them one after another in one kernel)
are bundled when

- they are *ready together*: the tensors they read become ready at the same depth of the graph
  (AStitch's "same layer"), or they are *last*: only variable writes read their outputs (the
  optimizer's updates), so running them together delays nothing the step returns;
- no path leads from one to another (through any node, or through a bundle already made):
  a bundle is one node, and its members run together;
- they are on one device, in one loop frame and alive under the same branches (lowered
  control flow: kernels of both sides of a Switch never run together);
- on a CPU, kernels ready together are bundled only while the bundle is less work than waking
  a second core (`cost_model.shares_a_core`): TensorFlow's executor runs independent kernels
  side by side, as fusion/siblings.py explains. The optimizer's updates (*last*) are bundled
  on both.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from tf_stitch.fusion.cost_model import output_cycles, shares_a_core
from tf_stitch.fusion.critical_path import critical_path
from tf_stitch.fusion.legality import Context
from tf_stitch.fusion.op_kinds import HALF_DTYPES
from tf_stitch.fusion.planner import Group
from tf_stitch.fusion.siblings import Log, side_by_side
from tf_stitch.fusion.union_find import UnionFind
from tf_stitch.graph.ir import INT_DTYPES, Graph

WRITES = frozenset({"AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"})
# At most this many tensors (pointers) in one bundle: a CUDA launch's parameters are 4 KB.
MAX_TENSORS = 480


def plan_bundles(
    graph: Graph, groups: Sequence[Group], gpu: bool = False, log: Log | None = None
) -> list[list[int]]:
    """Which of `groups` (indices, each a bundleable kernel's) run as one kernel: lists of two
    or more, in `groups`' order. `gpu`: planned for a GPU; `log` gets the CPU's refusals."""
    if len(groups) < 2:
        return []
    finder = _Reach(graph, groups)
    keys: dict[tuple, list[list[int]]] = defaultdict(list)
    tensors = [len(g.inputs) + len(g.outputs) for g in groups]
    seen: Counter[tuple] = Counter()  # candidates so far, by key
    cycles = [output_cycles(info.shape for n in g.nodes for info in n.outputs) for g in groups]
    for i, group in enumerate(groups):
        # a bundle's members share one preamble: the 16-bit floats', float64's and the
        # integers' helpers, or not
        values = [info for n in group.nodes for info in n.outputs]
        values += [graph.info(r) for r in group.inputs]
        half = any(info.dtype in HALF_DTYPES for info in values)
        double = any(info.dtype == "float64" for info in values)
        integer = any(info.dtype in INT_DTYPES for info in values)
        key = (*finder.key(i, group), half, double, integer)
        open_bundles = keys[key]
        side_by_side_on_a_cpu = not gpu and key[0] == "layer"
        seen[key] += 1
        if side_by_side_on_a_cpu and not shares_a_core([cycles[i]]):
            if log is not None and seen[key] > 1:
                log(f"bundle {group.nodes[0].name}", side_by_side(cycles[i]))
            continue
        target = next(
            (
                b
                for b in open_bundles
                if sum(tensors[j] for j in b) + tensors[i] <= MAX_TENSORS
                and not finder.connected(i, b[0])  # b's members are one unit
                and (not side_by_side_on_a_cpu or shares_a_core([cycles[j] for j in [*b, i]]))
            ),
            None,
        )
        if target is None:
            open_bundles.append([i])
        else:
            target.append(i)
            finder.merge(target[0], i)
    return [b for bundles in keys.values() for b in bundles if len(b) > 1]


class _Reach:
    """Paths between groups in the graph where the bundles made so far are single nodes."""

    def __init__(self, graph: Graph, groups: Sequence[Group]) -> None:
        self.graph = graph
        self.unit: dict[str, str] = {}  # node -> the group it is in
        self.names: dict[str, list[str]] = {}  # group -> its nodes
        for i, g in enumerate(groups):
            self.names[str(i)] = list(g.names)
            for name in g.names:
                self.unit[name] = str(i)
        self.units = UnionFind(set(self.names))  # groups, joined as they are bundled
        ctx = Context(graph)
        self.successors = ctx.successors
        self.depth = critical_path(graph, graph.topological_order()).depth
        self.fetched = {r.node for r in ctx.fetched}
        self.alive = ctx.liveness  # lowered control flow: frames and branches apart

    def key(self, i: int, group: Group) -> tuple:
        members = set(group.names)
        readers = {
            r for name in group.names for r in self.successors.get(name, ()) if r not in members
        }
        device = (group.nodes[0].device, self.alive[group.nodes[0].name])
        last = readers and all(self.graph.node(r).op in WRITES for r in readers)
        if last and not members & self.fetched:
            return ("last", device)
        layer = max(
            (
                self.depth[p]
                for node in group.nodes
                for p in [r.node for r in node.inputs] + node.control_inputs
                if p not in members
            ),
            default=-1,
        )
        return ("layer", layer, device)

    def merge(self, a: int, b: int) -> None:
        self.units.union(str(a), str(b))

    def _members(self, root: str) -> list[str]:
        return [n for g in self.units.members(root) for n in self.names[g]]

    def connected(self, a: int, b: int) -> bool:
        """Whether a path leads from the unit of group `a` to that of `b`, or back."""
        ra, rb = self.units.find(str(a)), self.units.find(str(b))
        return ra == rb or self._reaches(ra, rb) or self._reaches(rb, ra)

    def _reaches(self, source: str, target: str) -> bool:
        start = set(self._members(source))
        stack = [s for name in start for s in self.successors.get(name, ()) if s not in start]
        seen: set[str] = set()
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            unit = self.unit.get(name)
            root = self.units.find(unit) if unit is not None else None
            if root == target:
                return True
            nexts = self._members(root) if root is not None and root != source else [name]
            for member in nexts:
                seen.add(member)
                stack.extend(s for s in self.successors.get(member, ()) if s not in seen)
        return False
