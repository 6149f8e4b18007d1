"""The typed IR: tensor names, tensor types, nodes and graph edits."""

from __future__ import annotations

import pytest

from tf_stitch.graph.ir import Graph, Node, TensorInfo, TensorRef

F = TensorInfo("float32", (2, 3))


def chain() -> Graph:
    """x -> a -> b, with c reading a and b; n waits on a by a control edge."""
    g = Graph()
    g.add(Node("x", "Placeholder", outputs=[F]))
    g.add(Node("a", "Relu", [TensorRef("x")], outputs=[F]))
    g.add(Node("b", "Neg", [TensorRef("a")], outputs=[F]))
    g.add(Node("c", "AddV2", [TensorRef("a"), TensorRef("b")], outputs=[F]))
    g.add(Node("n", "NoOp", control_inputs=["a"]))
    g.inputs, g.outputs, g.targets = [TensorRef("x")], [TensorRef("c")], ["n"]
    return g


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a", TensorRef("a", 0)),
        ("a:0", TensorRef("a", 0)),
        ("scope/a:12", TensorRef("scope/a", 12)),
        ("a:b", TensorRef("a:b", 0)),  # not an index: part of the name
    ],
)
def test_tensor_ref_parse(text: str, expected: TensorRef) -> None:
    assert TensorRef.parse(text) == expected


@pytest.mark.parametrize("text", ["", "^a", "^a:0"])
def test_tensor_ref_parse_rejects_control_and_empty_names(text: str) -> None:
    with pytest.raises(ValueError, match="not a tensor name"):
        TensorRef.parse(text)


def test_tensor_ref_str_is_tensorflow_spelling() -> None:
    assert str(TensorRef("s/a", 1)) == "s/a:1"
    assert str(TensorRef("a")) == "a:0"
    assert TensorRef.parse(str(TensorRef("s/a", 3))) == TensorRef("s/a", 3)


@pytest.mark.parametrize(
    ("shape", "rank", "full", "n"),
    [
        ((2, 3), 2, True, 6),
        ((), 0, True, 1),
        ((4, 0, 2), 3, True, 0),
        ((None, 3), 2, False, None),
        (None, None, False, None),
    ],
)
def test_tensor_info(
    shape: tuple[int | None, ...] | None, rank: int | None, full: bool, n: int | None
) -> None:
    info = TensorInfo("float32", shape)
    assert info.rank == rank
    assert info.fully_defined() is full
    assert info.num_elements() == n


def test_node_copy_is_independent() -> None:
    node = Node("a", "Relu", [TensorRef("x")], {"T": 1}, [F], ["c"], "/cpu:0")
    dup = node.copy()
    dup.inputs.append(TensorRef("y"))
    dup.attrs["U"] = 2
    dup.control_inputs.clear()
    dup.outputs.clear()
    assert node.inputs == [TensorRef("x")] and node.attrs == {"T": 1}
    assert node.control_inputs == ["c"] and node.outputs == [F]
    assert dup.device == "/cpu:0" and node.output(1) == TensorRef("a", 1)


def test_graph_access() -> None:
    g = chain()
    assert "a" in g and "zz" not in g and len(g) == 5
    assert [n.name for n in g] == ["x", "a", "b", "c", "n"]
    assert g.info(TensorRef("a")) == F
    assert g.producer(TensorRef("b")).op == "Neg"
    assert g.fed() == {TensorRef("x")} and g.fetched() == {TensorRef("c")}


def test_graph_lookup_errors_name_the_missing_thing() -> None:
    g = chain()
    with pytest.raises(KeyError, match="no node named 'zz'"):
        g.node("zz")
    with pytest.raises(KeyError, match="Relu node 'a' has no output 1"):
        g.info(TensorRef("a", 1))
    with pytest.raises(ValueError, match="'a' already exists"):
        g.add(Node("a", "Relu"))


def test_consumers_and_control_consumers() -> None:
    g = chain()
    assert g.consumers() == {
        TensorRef("x"): ["a"],
        TensorRef("a"): ["b", "c"],
        TensorRef("b"): ["c"],
    }
    assert g.control_consumers() == {"a": ["n"]}


def test_topological_order_puts_producers_first_and_keeps_insertion_order() -> None:
    g = Graph()
    g.add(Node("late", "Neg", [TensorRef("early")], outputs=[F]))
    g.add(Node("ctl", "NoOp", control_inputs=["late"]))
    g.add(Node("early", "Placeholder", outputs=[F]))
    g.add(Node("free", "Placeholder", outputs=[F]))
    assert [n.name for n in g.topological_order()] == ["early", "late", "ctl", "free"]
    assert [n.name for n in chain().topological_order()] == ["x", "a", "b", "c", "n"]


def test_topological_order_reports_cycles_and_missing_inputs() -> None:
    g = Graph()
    g.add(Node("a", "Neg", [TensorRef("b")], outputs=[F]))
    g.add(Node("b", "Neg", [TensorRef("a")], outputs=[F]))
    with pytest.raises(ValueError, match="cycle through 'a'"):
        g.topological_order()
    h = Graph()
    h.add(Node("a", "NoOp", control_inputs=["ghost"]))
    with pytest.raises(ValueError, match="'a' reads 'ghost', which is not in the graph"):
        h.topological_order()


def test_a_loops_back_edge_does_not_order_the_merge() -> None:
    g = Graph()
    g.add(Node("enter", "Enter", [TensorRef("x")], outputs=[F]))
    g.add(Node("merge", "Merge", [TensorRef("enter"), TensorRef("next")], outputs=[F, F]))
    g.add(Node("body", "Tanh", [TensorRef("merge")], outputs=[F]))
    g.add(Node("next", "NextIteration", [TensorRef("body")], outputs=[F]))
    g.add(Node("x", "Placeholder", outputs=[F]))
    assert g.predecessors(g.node("merge")) == {"enter"}
    assert [n.name for n in g.topological_order()] == ["x", "enter", "merge", "body", "next"]


def test_copy_does_not_share_mutable_state() -> None:
    g = chain()
    g.library, g.versions = b"lib", b"ver"
    dup = g.copy()
    dup.node("a").inputs[0] = TensorRef("zz")
    dup.node("n").control_inputs.append("b")
    dup.outputs.append(TensorRef("b"))
    dup.targets.clear()
    dup.remove(["c"])
    assert g.node("a").inputs == [TensorRef("x")] and g.node("n").control_inputs == ["a"]
    assert g.outputs == [TensorRef("c")] and g.targets == ["n"] and "c" in g
    assert (dup.library, dup.versions) == (b"lib", b"ver")
    deep = g.deepcopy()
    deep.node("a").attrs["x"] = 1
    assert "x" not in g.node("a").attrs


def test_unique_name() -> None:
    g = chain()
    assert g.unique_name("new") == "new"
    assert g.unique_name("a") == "a_1"
    g.add(Node("a_1", "NoOp"))
    assert g.unique_name("a") == "a_2"


def test_replace_uses_rewires_readers_and_fetches_only() -> None:
    g = chain()
    g.outputs.append(TensorRef("a"))
    g.replace_uses(TensorRef("a"), TensorRef("x"))
    assert g.node("b").inputs == [TensorRef("x")]
    assert g.node("c").inputs == [TensorRef("x"), TensorRef("b")]
    assert g.outputs == [TensorRef("c"), TensorRef("x")]
    assert g.node("n").control_inputs == ["a"]  # control edges name nodes, not tensors


def test_remove_unknown_node_raises() -> None:
    g = chain()
    g.remove(["n"])
    assert "n" not in g
    with pytest.raises(KeyError):
        g.remove(["n"])
