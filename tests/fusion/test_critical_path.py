"""critical_path: longest paths in nodes, over data and control edges."""

from __future__ import annotations

from tf_stitch.fusion.critical_path import CriticalPath, critical_path
from tf_stitch.graph.ir import Graph, Node, TensorInfo, TensorRef

F32 = TensorInfo("float32", (4,))


def graph(edges: dict[str, list[str]], control: dict[str, list[str]] | None = None) -> Graph:
    """Nodes named by `edges` keys (in order), reading the listed nodes' outputs."""
    g = Graph()
    for name, preds in edges.items():
        op = "Exp" if preds else "Placeholder"
        g.add(
            Node(
                name,
                op,
                [TensorRef(p) for p in preds],
                outputs=[F32],
                control_inputs=list((control or {}).get(name, [])),
            )
        )
    return g


def cp_of(g: Graph) -> CriticalPath:
    return critical_path(g, g.topological_order())


def test_a_chain_is_its_own_critical_path() -> None:
    cp = cp_of(graph({"a": [], "b": ["a"], "c": ["b"], "d": ["c"]}))
    assert cp.length == 4
    assert cp.depth == {"a": 1, "b": 2, "c": 3, "d": 4}
    assert cp.height == {"a": 4, "b": 3, "c": 2, "d": 1}
    assert all(cp.on_path(p, c) for p, c in [("a", "b"), ("b", "c"), ("c", "d")])
    assert cp.edge_weight("b", "c") == 4


def test_the_long_side_of_a_diamond_is_critical_and_the_short_side_is_not() -> None:
    # a -> b -> c -> d (long) and a -> d (short)
    cp = cp_of(graph({"a": [], "b": ["a"], "c": ["b"], "d": ["c", "a"]}))
    assert cp.length == 4
    assert cp.edge_weight("a", "d") == 2
    assert not cp.on_path("a", "d")
    assert cp.on_path("a", "b") and cp.on_path("c", "d")


def test_branches_off_the_longest_path_are_shorter() -> None:
    # a -> b -> c -> d ; b -> e (a side branch)
    cp = cp_of(graph({"a": [], "b": ["a"], "c": ["b"], "d": ["c"], "e": ["b"]}))
    assert cp.length == 4
    assert cp.edge_weight("b", "e") == 3
    assert not cp.on_path("b", "e")
    assert cp.height["b"] == 3


def test_control_edges_lengthen_paths() -> None:
    g = graph({"a": [], "b": ["a"], "x": [], "y": ["x"]}, control={"x": ["b"]})
    cp = cp_of(g)
    assert cp.depth["x"] == 3 and cp.depth["y"] == 4
    assert cp.height["a"] == 4
    assert cp.length == 4
    assert cp.on_path("x", "y")


def test_disconnected_components_are_measured_separately() -> None:
    g = graph({"a": [], "b": ["a"], "p": [], "q": ["p"], "r": ["q"]})
    cp = cp_of(g)
    assert cp.length == 3
    assert not cp.on_path("a", "b")
    assert cp.on_path("p", "q") and cp.on_path("q", "r")


def test_an_empty_graph_has_length_zero() -> None:
    assert cp_of(Graph()).length == 0


def test_a_node_reading_two_outputs_of_one_producer_counts_it_once() -> None:
    g = Graph()
    g.add(Node("a", "Placeholder", outputs=[F32, F32]))
    g.add(Node("b", "AddV2", [TensorRef("a", 0), TensorRef("a", 1)], outputs=[F32]))
    cp = cp_of(g)
    assert (cp.length, cp.depth["b"], cp.height["a"]) == (2, 2, 2)
