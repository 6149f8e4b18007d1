"""passes/sum_terms.py: the terms of an AddN only it reads, and one value put in their place."""

from __future__ import annotations

from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.passes.sum_terms import finish_sum, replace_terms, sole_terms

F = TensorInfo("float32", (3,))


def _sum() -> Graph:
    """s = AddN(a, b, a2, c, c) with a2 also read by r; c is summed twice."""
    g = Graph()
    for name in ("a", "b", "a2", "c", "v"):
        g.add(Node(name, "Exp", [], outputs=[F]))
    refs = [TensorRef(n) for n in ("a", "b", "a2", "c", "c")]
    g.add(Node("s", "AddN", refs, {"N": 5, "T": DType("float32")}, [F]))
    g.add(Node("r", "Neg", [TensorRef("a2")], outputs=[F]))
    g.outputs = [TensorRef("s"), TensorRef("r")]
    return g


def test_sole_terms_are_summed_once_and_read_by_nothing_else() -> None:
    g = _sum()
    assert sole_terms(g.node("s"), g.consumers()) == [TensorRef("a"), TensorRef("b")]


def test_replaced_terms_go_and_the_value_takes_the_first_given_ones_place() -> None:
    g = _sum()
    add = g.node("s")
    replace_terms(g, add, [TensorRef("b"), TensorRef("a")], TensorRef("v"))
    assert "a" not in g.nodes and "b" not in g.nodes
    assert add.inputs == [
        TensorRef("a2"),
        TensorRef("v"),
        TensorRef("c"),
        TensorRef("c"),
    ]  # b's place
    finish_sum(add)
    assert add.op == "AddN" and add.attrs["N"] == 4


def test_a_sum_left_with_one_term_is_an_identity() -> None:
    g = _sum()
    add = g.node("s")
    add.inputs = [TensorRef("v")]
    finish_sum(add)
    assert add.op == "Identity" and add.attrs == {"T": DType("float32")}
