"""Under which control flow each node's outputs are alive: its loop frame and Switch branches.

Lowered control flow (TF1's `tf.cond` and `tf.while_loop`, Grappler's lowering of If/While)
runs ops in *frames*: `Enter` starts a loop's frame, `Exit` leaves it. A `Switch` forwards its
input to one output; the other output is *dead*, and so is every op that reads a dead tensor,
until a `Merge` takes whichever input is alive. A kernel runs only when all its inputs are
alive, so ops may share one only if they are alive under the same conditions in the same frame.
`liveness(graph)[name]` is that key for every node. A condition is a predicate tensor and a
branch: the Switches of one `tf.cond` (one per value it reads) share their predicate, and so do
those of one loop's variables.
"""

from __future__ import annotations

from dataclasses import dataclass

from tf_stitch.graph.ir import MERGE_OPS, NEXT_ITERATION_OPS, Graph, Node

SWITCH_OPS = frozenset({"Switch", "RefSwitch", "_SwitchN"})
ENTER_OPS = frozenset({"Enter", "RefEnter"})
EXIT_OPS = frozenset({"Exit", "RefExit"})
# Ops that move values between frames or branches: they never share a kernel.
CONTROL_FLOW_OPS = (
    SWITCH_OPS
    | MERGE_OPS
    | ENTER_OPS
    | EXIT_OPS
    | NEXT_ITERATION_OPS
    | frozenset({"LoopCond", "ControlTrigger"})
)


@dataclass(frozen=True)
class Condition:
    """Alive only where a Switch on `predicate` (in loop frame `frame`) takes `branch`."""

    frame: tuple[str, ...]
    predicate: str  # the predicate tensor, "node:index"
    branch: int


@dataclass(frozen=True)
class Liveness:
    frame: tuple[str, ...]  # the loop frames around the node, outermost first; () is the root
    conditions: frozenset[Condition]

    def __str__(self) -> str:
        where = "/".join(self.frame) or "root frame"
        branches = sorted(f"{c.predicate} -> {c.branch}" for c in self.conditions)
        return where + (f", alive with {', '.join(branches)}" if branches else "")


ROOT = Liveness((), frozenset())


def uses_control_flow(graph: Graph) -> bool:
    return any(n.op in CONTROL_FLOW_OPS for n in graph)


def liveness(graph: Graph) -> dict[str, Liveness]:
    """The liveness key of every node (all ROOT in a graph without lowered control flow)."""
    if not uses_control_flow(graph):
        return dict.fromkeys(graph.nodes, ROOT)
    keys: dict[str, Liveness] = {}
    for node in graph.topological_order():
        keys[node.name] = _key(graph, node, keys)
    return keys


def _key(graph: Graph, node: Node, keys: dict[str, Liveness]) -> Liveness:
    preds = graph.predecessors(node)
    sources = [_output_key(graph, r.node, r.index, keys) for r in node.inputs if r.node in preds]
    sources += [keys[c] for c in node.control_inputs if c in preds]
    if not sources:
        return ROOT
    if node.op in ENTER_OPS:
        frame_name = node.attrs.get("frame_name", b"")
        name = frame_name.decode() if isinstance(frame_name, bytes) else str(frame_name)
        return Liveness((*sources[0].frame, name), sources[0].conditions)
    if node.op in EXIT_OPS:
        inner = sources[0]
        kept = frozenset(c for c in inner.conditions if c.frame != inner.frame)
        return Liveness(inner.frame[:-1], kept)
    if node.op in MERGE_OPS:  # alive where any input is
        conditions = frozenset.intersection(*(s.conditions for s in sources))
        return Liveness(sources[0].frame, conditions)
    frame = max((s.frame for s in sources), key=len)
    return Liveness(frame, frozenset().union(*(s.conditions for s in sources)))


def _output_key(graph: Graph, name: str, index: int, keys: dict[str, Liveness]) -> Liveness:
    key = keys[name]
    node = graph.node(name)
    if node.op in SWITCH_OPS and len(node.inputs) > 1:
        condition = Condition(key.frame, str(node.inputs[1]), index)
        return Liveness(key.frame, key.conditions | {condition})
    return key
