"""What the decompose-* passes share: when a composite may be expanded, and how."""

from __future__ import annotations

from collections.abc import Callable

from tf_stitch.graph.ir import Graph, Node


def decomposable(graph: Graph, node: Node, dtype_attr: str = "T") -> bool:
    """A float32 composite of known rank, not fed, with no control edges, only output 0 used."""
    if node.control_inputs or node.name in graph.control_consumers():
        return False
    if any(r.node == node.name for r in graph.inputs):
        return False
    dtype = node.attrs.get(dtype_attr)
    if getattr(dtype, "name", None) != "float32":
        return False
    if not node.outputs or node.outputs[0].shape is None:
        return False
    used = {r.index for n in graph for r in n.inputs if r.node == node.name}
    used |= {r.index for r in graph.outputs if r.node == node.name}
    return used <= {0}


def decompose_each(
    graph: Graph, accepts: Callable[[Node], bool], rewrite: Callable[[Graph, Node], None]
) -> Graph:
    """A copy of `graph` with `rewrite` applied to every decomposable node that `accepts`."""
    out = graph.copy()
    for node in list(out):
        if accepts(node) and decomposable(out, node):
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
