"""Declarative structural patterns for local rewrites (after tf2onnx's OpTypePattern).

`OpPattern("Reshape", inputs=[OpPattern("Const"), ANY])` matches a Reshape whose first input is
produced by a Const. Matching is purely structural; the rewrite then checks semantics.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tf_stitch.graph.ir import Graph, Node


@dataclass(frozen=True)
class OpPattern:
    ops: str  # "Add|AddV2", or "*" for any op
    inputs: tuple[OpPattern, ...] | None = None  # None: don't look at the inputs
    name: str = ""  # bind the matched node under this name

    def accepts(self, op: str) -> bool:
        return self.ops == "*" or op in self.ops.split("|")


ANY = OpPattern("*")


@dataclass
class Match:
    root: Node
    bound: dict[str, Node] = field(default_factory=dict)


def match(graph: Graph, node: Node, pattern: OpPattern) -> Match | None:
    bound: dict[str, Node] = {}
    if _match(graph, node, pattern, bound):
        return Match(node, bound)
    return None


def _match(graph: Graph, node: Node, pattern: OpPattern, bound: dict[str, Node]) -> bool:
    if not pattern.accepts(node.op):
        return False
    if pattern.inputs is not None:
        if len(node.inputs) != len(pattern.inputs):
            return False
        for ref, sub in zip(node.inputs, pattern.inputs, strict=True):
            if sub is ANY:
                continue
            producer = graph.nodes.get(ref.node)
            if producer is None or not _match(graph, producer, sub, bound):
                return False
    if pattern.name:
        bound[pattern.name] = node
    return True


def find_all(graph: Graph, pattern: OpPattern) -> list[Match]:
    return [m for node in graph if (m := match(graph, node, pattern)) is not None]
