"""What the decompose-* passes share: when a composite may be expanded, and how."""

from __future__ import annotations

from collections.abc import Callable

from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import Graph, Node


class _Uses:
    """What `decomposable` asks of the graph, collected once: what the guard leaves alone and
    which outputs of each node are read or fetched. A rewrite that replaces a node under its
    own name (replace_with) leaves these true for every other node."""

    def __init__(self, graph: Graph) -> None:
        self.guard = Guard(graph)
        self.used: dict[str, set[int]] = {}
        for n in graph:
            for r in n.inputs:
                self.used.setdefault(r.node, set()).add(r.index)
        for r in graph.outputs:
            self.used.setdefault(r.node, set()).add(r.index)

    def decomposable(
        self, node: Node, dtype_attr: str = "T", dtypes: tuple[str, ...] = ("float32",)
    ) -> bool:
        """A composite of one of `dtypes` (float32 unless the decomposition builds its ops in
        the node's dtype) and of known rank, not fed, with no control edges, only output 0
        used."""
        if not self.guard.rewritable(node) or node.name in self.guard.ordered:
            return False
        dtype = node.attrs.get(dtype_attr)
        if getattr(dtype, "name", None) not in dtypes:
            return False
        if not node.outputs or node.outputs[0].shape is None:
            return False
        return self.used.get(node.name, set()) <= {0}


def decompose_each(
    graph: Graph,
    accepts: Callable[[Node], bool],
    rewrite: Callable[[Graph, Node], None],
    dtypes: tuple[str, ...] = ("float32",),
) -> Graph:
    """A copy of `graph` with `rewrite` applied to every decomposable node (of one of `dtypes`)
    that `accepts`."""
    out = graph.copy()
    uses = _Uses(out)
    for node in list(out):
        if accepts(node) and uses.decomposable(node, dtypes=dtypes):
            rewrite(out, node)
    return out


def replace_with(graph: Graph, node: Node, build: Callable[[str], None]) -> None:
    """Removes `node` and calls `build(name)`, which must create the node producing its output
    under the same name (output 0)."""
    name = node.name
    graph.remove([name])
    build(name)
    # Keep the insertion order readable: move the final node after its new producers.
    final = graph.nodes.pop(name)
    graph.nodes[name] = final


def channels_first(node: Node) -> bool:
    """True for NCHW-style `data_format` attributes (the default is channels-last)."""
    fmt = node.attrs.get("data_format", b"NHWC")
    return (fmt.decode() if isinstance(fmt, bytes) else str(fmt)).startswith("NC")
