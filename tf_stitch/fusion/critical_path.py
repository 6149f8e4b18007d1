"""Longest data-dependence paths (FusionStitching grows groups along them first)."""

from __future__ import annotations

from dataclasses import dataclass

from tf_stitch.graph.ir import Graph, Node


@dataclass(frozen=True)
class CriticalPath:
    depth: dict[str, int]  # longest path from a source to the node, in nodes
    height: dict[str, int]  # longest path from the node to a sink, in nodes
    length: int

    def edge_weight(self, producer: str, consumer: str) -> int:
        """Length of the longest path through the edge producer -> consumer."""
        return self.depth[producer] + self.height[consumer]

    def on_path(self, producer: str, consumer: str) -> bool:
        return self.edge_weight(producer, consumer) == self.length


def critical_path(graph: Graph, order: list[Node]) -> CriticalPath:
    """Depths and heights over data and control edges (not loops' back edges); `order` is a
    topological order."""
    depth: dict[str, int] = {}
    for node in order:
        depth[node.name] = 1 + max((depth[p] for p in graph.predecessors(node)), default=0)
    height: dict[str, int] = {n.name: 1 for n in order}
    for node in reversed(order):
        for p in graph.predecessors(node):
            height[p] = max(height[p], height[node.name] + 1)
    length = max((depth[n] + height[n] - 1 for n in depth), default=0)
    return CriticalPath(depth, height, length)
