"""What a pass may rewrite: the one guard every rewrite asks before it touches a node.

A node is *rewritable* (its op and inputs may be replaced, under its own name, by others that
compute the same outputs) unless something outside its data edges depends on how it runs:

- it has control inputs: it must run after something, which a replacement would not keep;
- an output of it is fed: its value comes from the caller, and the rewrite would read inputs
  the feed makes dead.

A rewritable node is also *removable* (it may disappear, or its readers may be pointed at
another value) unless the caller or another node names it: it is fetched, a target, or another
node waits for it by a control edge.

`Guard(graph)` collects the fed, fetched, target and control-ordered nodes once, for passes that
ask about many nodes; it stays true for a pass that only replaces nodes under their own names.
"""

from __future__ import annotations

from tf_stitch.graph.ir import Graph, Node


class Guard:
    """The nodes of `graph` a pass must leave alone, collected once."""

    def __init__(self, graph: Graph) -> None:
        self.fed = {r.node for r in graph.inputs}
        self.named = {r.node for r in graph.outputs} | set(graph.targets)
        self.ordered = set(graph.control_consumers())  # nodes others wait for by control edge
        self._kept = self.named | self.ordered

    def rewritable(self, node: Node) -> bool:
        """Whether `node` may be replaced, under its name, by ops computing the same outputs."""
        return not node.control_inputs and node.name not in self.fed

    def removable(self, node: Node) -> bool:
        """Whether `node` may go: rewritable, not fetched or a target, and no node waits for it."""
        return self.rewritable(node) and node.name not in self._kept


def rewritable(graph: Graph, node: Node) -> bool:
    """`Guard(graph).rewritable(node)`, for a pass that asks about one node."""
    return Guard(graph).rewritable(node)


def removable(graph: Graph, node: Node) -> bool:
    """`Guard(graph).removable(node)`, for a pass that asks about one node."""
    return Guard(graph).removable(node)
