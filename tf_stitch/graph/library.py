"""Walking a GraphDef with its function library: every node, and the functions a node calls."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tf_stitch.graph.io import GraphDef


def all_nodes(graph_def: GraphDef) -> Iterator[Any]:
    """The nodes of the main graph, then those of every library function."""
    yield from graph_def.node
    for function in graph_def.library.function:
        yield from function.node_def


def library_nodes(graph_def: GraphDef) -> Iterator[Any]:
    """The nodes of every library function."""
    for function in graph_def.library.function:
        yield from function.node_def


def function_refs(node: Any) -> Iterator[Any]:
    """Every function reference among `node`'s attrs (a loop's body and cond, a branch, a call's
    function), as the `NameAttrList` messages themselves: renaming one renames the reference."""
    for value in node.attr.values():
        if value.HasField("func"):
            yield value.func
        yield from value.list.func
