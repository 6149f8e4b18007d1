"""OpPattern: purely structural matching of local subgraphs."""

from __future__ import annotations

import pytest

from tf_stitch.graph.ir import Graph, Node, TensorInfo, TensorRef
from tf_stitch.passes.patterns import ANY, OpPattern, find_all, match

F = TensorInfo("float32", (2,))


def graph() -> Graph:
    g = Graph()
    g.add(Node("x", "Placeholder", outputs=[F]))
    g.add(Node("c", "Const", outputs=[F]))
    g.add(Node("add", "AddV2", [TensorRef("x"), TensorRef("c")], outputs=[F]))
    g.add(Node("add_old", "Add", [TensorRef("c"), TensorRef("c")], outputs=[F]))
    g.add(Node("relu", "Relu", [TensorRef("add")], outputs=[F]))
    g.add(Node("dangling", "Relu", [TensorRef("ghost")], outputs=[F]))
    return g


@pytest.mark.parametrize(
    ("ops", "op", "accepted"),
    [
        ("Add|AddV2", "AddV2", True),
        ("Add|AddV2", "Add", True),
        ("Add|AddV2", "AddN", False),
        ("*", "Anything", True),
        ("Add", "AddV2", False),
    ],
)
def test_accepts(ops: str, op: str, accepted: bool) -> None:
    assert OpPattern(ops).accepts(op) is accepted


def test_match_binds_named_nodes() -> None:
    g = graph()
    pattern = OpPattern(
        "Relu",
        inputs=(
            OpPattern("Add|AddV2", inputs=(ANY, OpPattern("Const", name="const")), name="sum"),
        ),
        name="act",
    )
    m = match(g, g.node("relu"), pattern)
    assert m is not None and m.root.name == "relu"
    assert {k: v.name for k, v in m.bound.items()} == {"act": "relu", "sum": "add", "const": "c"}


def test_any_input_is_not_looked_at() -> None:
    g = graph()
    assert match(g, g.node("dangling"), OpPattern("Relu", inputs=(ANY,))) is not None
    assert match(g, g.node("add"), OpPattern("AddV2")) is not None  # inputs=None: any inputs


@pytest.mark.parametrize(
    ("node", "pattern"),
    [
        ("relu", OpPattern("Sigmoid")),
        ("add", OpPattern("AddV2", inputs=(ANY,))),  # wrong number of inputs
        ("add", OpPattern("AddV2", inputs=(OpPattern("Const"), OpPattern("Const")))),
        ("dangling", OpPattern("Relu", inputs=(OpPattern("*"),))),  # producer missing
    ],
)
def test_does_not_match_wrong_ops_arity_producers_or_missing_nodes(
    node: str, pattern: OpPattern
) -> None:
    g = graph()
    assert match(g, g.node(node), pattern) is None


def test_failed_match_binds_nothing() -> None:
    g = graph()
    pattern = OpPattern("AddV2", inputs=(OpPattern("Placeholder", name="p"), OpPattern("Relu")))
    assert match(g, g.node("add"), pattern) is None


def test_find_all_in_graph_order() -> None:
    g = graph()
    both = OpPattern("Add|AddV2", inputs=(ANY, OpPattern("Const")))
    assert [m.root.name for m in find_all(g, both)] == ["add", "add_old"]
    assert find_all(g, OpPattern("Sigmoid")) == []
