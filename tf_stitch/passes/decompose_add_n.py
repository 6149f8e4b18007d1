"""decompose-add-n: AddN of n >= 2 tensors becomes a chain of AddV2."""

from __future__ import annotations

from tf_stitch.fusion.op_kinds import FLOAT_DTYPES
from tf_stitch.graph.ir import Graph, Node
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder
from tf_stitch.passes.decompose_common import decompose_each, replace_with


@graph_pass("decompose-add-n")
def decompose_add_n(graph: Graph, ctx: PassContext) -> Graph:
    """Rewrites float AddN into AddV2 nodes (left to right)."""
    return decompose_each(graph, _accepts, _rewrite, FLOAT_DTYPES)


def _accepts(node: Node) -> bool:
    return node.op == "AddN" and len(node.inputs) >= 2


def _rewrite(graph: Graph, node: Node) -> None:
    shape = node.outputs[0].shape
    b = NodeBuilder(graph, node.name + "_decomposed", node.device)
    terms = list(node.inputs)

    def build(name: str) -> None:
        acc = terms[0]
        for i, t in enumerate(terms[1:], start=1):
            last = name if i == len(terms) - 1 else None
            acc = b.binary("AddV2", acc, t, shape, node.outputs[0].dtype, name=last)

    replace_with(graph, node, build)
