"""drop-pure-control-deps: control edges that order no side effect; drop them.

A control edge A -> B between side-effect-free nodes only matters through what it orders: the
side effects upstream of A (variable reads and writes, random draws, checks) before those
downstream of B. It is dropped when that order holds anyway and those effects still run:

- A and all its ancestors are stateless (Grappler's dependency optimizer does the same). Frozen
  Keras graphs end in `Identity(out, ^NoOp)` where the NoOp waits on constant reads: after this
  pass those edges no longer block fusion.
- In a training step every value descends from variable reads, and `tf.gradients` adds edges
  such as `Square(x, ^grad)` (`_SquareGrad`) or `sub(.., ^truediv)` (a mean's gradient) only to
  schedule memory. Such an edge goes when every effect upstream of A reaches every effect
  downstream of B (the optimizer's writes) without the edges this pass may drop, and each of
  those upstream effects is still needed by an output or target without them.

Edges from or into lowered control flow (a Switch, Enter, Merge ... upstream of A) are kept:
they put a constant into its branch or loop frame.
"""

from __future__ import annotations

from tf_stitch.fusion.legality import is_stateful
from tf_stitch.graph.ir import Graph, Node
from tf_stitch.graph.liveness import CONTROL_FLOW_OPS
from tf_stitch.passes.base import PassContext, graph_pass

# Stateless ops whose only effect is to fail: ordering on them is observable.
_CHECKING_OPS = frozenset({"CheckNumerics", "CheckNumericsV2", "EnsureShape"})

Edge = tuple[str, str]


def _has_effect(node: Node) -> bool:
    return is_stateful(node.op) or node.op in _CHECKING_OPS or node.op in CONTROL_FLOW_OPS


@graph_pass("drop-pure-control-deps")
def drop_pure_control_deps(graph: Graph, ctx: PassContext) -> Graph:
    """Drops control edges from side-effect-free nodes that order no side effect."""
    out = graph.copy()
    order = out.topological_order()
    effects = [n.name for n in order if _has_effect(n)]
    bit = {name: 1 << i for i, name in enumerate(effects)}
    candidates: set[Edge] = {
        (src, node.name)
        for node in order
        if node.op not in CONTROL_FLOW_OPS
        for src in node.control_inputs
        if src not in bit
    }
    if not candidates:
        return out
    flow = sum(bit[n.name] for n in order if n.op in CONTROL_FLOW_OPS)
    preds = {n.name: out.predecessors(n) for n in order}
    upstream, kept_upstream = _upstream_effects(order, preds, bit, candidates)
    needed = _needed_effects(out, candidates, bit)
    waits = _downstream_waits(order, preds, bit, kept_upstream)
    for node in out:
        node.control_inputs = [
            src
            for src in node.control_inputs
            if (src, node.name) not in candidates
            or upstream[src] & (flow | ~needed | ~waits[node.name])
        ]
    return out


def _upstream_effects(
    order: list[Node], preds: dict[str, set[str]], bit: dict[str, int], candidates: set[Edge]
) -> tuple[dict[str, int], dict[str, int]]:
    """Each node's effects upstream (itself included, as bits): along every edge, and along
    every edge but the candidates."""
    every: dict[str, int] = {}
    kept: dict[str, int] = {}
    for node in order:
        a = b = bit.get(node.name, 0)
        for p in preds[node.name]:
            a |= every.get(p, 0)
            if (p, node.name) not in candidates:
                b |= kept.get(p, 0)
        every[node.name], kept[node.name] = a, b
    return every, kept


def _needed_effects(graph: Graph, candidates: set[Edge], bit: dict[str, int]) -> int:
    """The effects an output or target still needs once every candidate edge is gone."""
    stack = [r.node for r in graph.outputs] + list(graph.targets)
    seen: set[str] = set()
    needed = 0
    while stack:
        name = stack.pop()
        if name in seen or name not in graph.nodes:
            continue
        seen.add(name)
        needed |= bit.get(name, 0)
        node = graph.nodes[name]
        stack += [r.node for r in node.inputs]
        stack += [c for c in node.control_inputs if (c, name) not in candidates]
    return needed


def _downstream_waits(
    order: list[Node], preds: dict[str, set[str]], bit: dict[str, int], kept: dict[str, int]
) -> dict[str, int]:
    """For each node, the effects that every effect downstream of it (itself included) waits
    for without the candidate edges; all bits where nothing downstream has an effect."""
    everything = (1 << len(bit)) - 1
    successors: dict[str, list[str]] = {n.name: [] for n in order}
    for node in order:
        for p in preds[node.name]:
            successors[p].append(node.name)
    waits: dict[str, int] = {}
    for node in reversed(order):
        w = kept[node.name] if node.name in bit else everything
        for s in successors[node.name]:
            w &= waits[s]
        waits[node.name] = w
    return waits
