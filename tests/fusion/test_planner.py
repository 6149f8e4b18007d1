"""plan_groups: which ops end up stitched together, and why others do not."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
from graph_helpers import prepared
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tf_stitch
from tf_stitch.codegen.cpu import emit_cpu
from tf_stitch.codegen.lower import lower
from tf_stitch.fusion.planner import PlannerOptions, plan_groups
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef, TensorValue

S = tf.TensorSpec


def compute_nodes(graph: Graph) -> set[str]:
    return {n.name for n in graph if n.op not in ("Placeholder", "Const", "Identity")}


def layer_norm(x: tf.Tensor) -> tf.Tensor:
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.square(x - m), -1, keepdims=True)
    return (x - m) * tf.math.rsqrt(v + 1e-5) * 1.5 + 0.1


def test_layer_norm_is_one_group() -> None:
    graph = prepared(layer_norm, S([None, 64]))
    plan = plan_groups(graph)
    (group,) = plan.groups
    assert compute_nodes(graph) <= set(group.names)
    assert group.schedule.kind == "row"
    assert [str(r) for r in group.inputs if graph.node(r.node).op != "Const"] == ["x:0"]
    assert len(group.outputs) == 1


def test_softmax_is_one_group() -> None:
    graph = prepared(tf.nn.softmax, S([8, 128]))
    (group,) = plan_groups(graph).groups
    assert compute_nodes(graph) <= set(group.names)
    assert {"Max", "Sub", "Exp", "Sum", "RealDiv"} <= {n.op for n in group.nodes}


def test_layer_norm_followed_by_gelu_is_one_group() -> None:
    graph = prepared(lambda x: tf.nn.gelu(layer_norm(x), approximate=True), S([4, 64]))
    (group,) = plan_groups(graph).groups
    assert compute_nodes(graph) <= set(group.names)
    assert {"Mean", "Rsqrt", "Tanh", "Pow"} <= {n.op for n in group.nodes}
    assert len(group.outputs) == 1


def test_two_independent_chains_stay_separate_groups() -> None:
    graph = prepared(lambda x, y: (tf.exp(x) * 2.0, tf.tanh(y) + 1.0), S([4, 8]), S([16]))
    plan = plan_groups(graph)
    assert len(plan.groups) == 2
    assert sorted(
        tuple(sorted(n.op for n in g.nodes if n.op != "Identity")) for g in plan.groups
    ) == [("AddV2", "Tanh"), ("Exp", "Mul")]


def test_does_not_fuse_when_the_merge_would_create_a_cycle_through_an_outside_op() -> None:
    def fn(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
        a = tf.exp(tf.tanh(x, name="t"), name="a")
        m = tf.matmul(a, w, transpose_b=True, name="m")  # stays outside every group
        return tf.nn.relu(tf.add(a, m, name="b"), name="r")

    graph = prepared(fn, S([4, 8]), S([8, 8]))
    plan = plan_groups(graph)
    assert "merge a -> b: forbid(would create a cycle through nodes outside the group)" in [
        str(r) for r in plan.records
    ]
    assert {frozenset(g.names) - {"Identity"} for g in plan.groups} == {
        frozenset({"t", "a"}),
        frozenset({"b", "r"}),
    }


def test_does_not_fuse_when_two_groups_would_depend_on_each_other() -> None:
    def fn(x: tf.Tensor) -> Any:
        a = tf.exp(x, name="a")
        c = tf.tanh(x, name="c")
        s = tf.reduce_sum(c, -1, keepdims=True, name="s")
        return tf.add(a, s, name="d"), tf.multiply(c, a, name="e")

    graph = prepared(fn, S([4, 8]))
    for name in ("a", "d"):  # {a, d} may not merge with the rest
        graph.node(name).device = "/device:CPU:1"
    plan = plan_groups(graph)
    # {a, d} reads s and {c, s, e} would read a: as two kernels, each would wait for the other
    # (which merge is refused first depends on the order the nodes are visited in)
    refused = [str(r) for r in plan.records if "would create a cycle" in str(r)]
    assert refused and all(r.startswith("merge ") and ": forbid(" in r for r in refused)
    # one of the two kernels is formed; no kernel holds ops of both sides
    for g in plan.groups:
        assert not ({"a", "d"} & set(g.names) and {"c", "s", "e"} & set(g.names)), g.names
    assert plan.groups


def test_every_decision_is_recorded_with_a_reason() -> None:
    graph = prepared(lambda x: tf.exp(tf.math.cumsum(tf.exp(x), axis=-1)) * 2.0, S([4, 8]))
    plan = plan_groups(graph)
    text = [str(r) for r in plan.records]
    assert "node Cumsum (Cumsum): forbid(Cumsum is opaque to the fuser)" in text
    assert any(t.startswith("merge Exp_1 -> mul: allow(loop over [4,8]") for t in text)
    assert any(t.startswith("group of Exp: forbid(fewer than two compute ops") for t in text)
    assert all(r.decision.reason for r in plan.records)


def test_min_compute_ops_is_a_knob() -> None:
    graph = prepared(lambda x: tf.exp(x), S([4, 8]))
    assert plan_groups(graph).groups == []
    (group,) = plan_groups(graph, PlannerOptions(min_compute_ops=1)).groups
    assert "Exp" in group.names


def test_a_single_node_without_a_layout_is_not_a_group() -> None:
    # an unknown batch against a known one: the broadcast is ambiguous until run time
    graph = prepared(lambda x, y: tf.exp(x + y), S([None, 8]), S([4, 8]))
    plan = plan_groups(graph, PlannerOptions(min_compute_ops=1))
    assert not any("add" in g.names for g in plan.groups)
    assert any("the broadcast is ambiguous" in str(r) for r in plan.records)


def test_optimized_layer_norm_and_gelu_is_one_kernel_matching_tensorflow() -> None:
    cf = tf.function(lambda x: tf.nn.gelu(layer_norm(x), approximate=True)).get_concrete_function(
        S([None, 64])
    )
    optimized = tf_stitch.optimize(cf)
    assert [n.op for n in optimized.graph].count("StitchedKernel") == 1
    assert [n.op for n in optimized.graph if n.op not in ("Placeholder", "Identity")] == [
        "StitchedKernel"
    ]
    x = tf.constant(np.random.default_rng(0).standard_normal((5, 64)).astype(np.float32))
    np.testing.assert_allclose(optimized(x), cf(x), rtol=1e-5, atol=1e-5)


def test_explain_prints_kernels_and_reasons() -> None:
    text = tf_stitch.explain(tf.function(layer_norm).get_concrete_function(S([None, 64])))
    assert "1 stitched kernel(s)" in text
    assert "row(split_dim=1, domain=[?,64], blocks=[?])" in text
    assert "merge Mean -> sub: allow(row over [?,64]; on the critical path)" in text


# -- property: random DAGs of elementwise / reduce / opaque ops ---------------------------------
F32 = "float32"
ROWS = 4
_KINDS = ("unary", "binary", "reduce", "reduce_nokeep", "opaque", "expand", "control")


def _const(g: Graph, name: str, array: np.ndarray) -> TensorRef:
    dtype = str(array.dtype)
    g.add(
        Node(
            name,
            "Const",
            [],
            {"value": TensorValue(array, dtype), "dtype": DType(dtype)},
            [TensorInfo(dtype, tuple(array.shape))],
        )
    )
    return TensorRef(name)


@st.composite
def random_graphs(draw: st.DrawFn) -> Graph:
    cols = draw(st.sampled_from([ROWS, 6]))  # square: row sums also broadcast along columns
    g = Graph()
    g.add(Node("x", "Placeholder", [], {"dtype": DType(F32)}, [TensorInfo(F32, (ROWS, cols))]))
    g.inputs = [TensorRef("x")]
    values = [TensorRef("x")]
    for i in range(draw(st.integers(2, 14))):
        name, kind = f"n{i}", draw(st.sampled_from(_KINDS))
        a = draw(st.sampled_from(values))
        shape = g.info(a).shape or ()
        attrs: dict[str, Any] = {"T": DType(F32)}
        controls: list[str] = []
        if kind == "unary" or kind == "control":
            op, inputs, out = draw(st.sampled_from(["Exp", "Tanh", "Neg"])), [a], shape
            if kind == "control":
                controls = [draw(st.sampled_from(values)).node]
        elif kind == "binary":
            b = draw(st.sampled_from(values))
            op, inputs = draw(st.sampled_from(["AddV2", "Mul", "Sub"])), [a, b]
            try:
                out = tuple(np.broadcast_shapes(shape, g.info(b).shape or ()))
            except ValueError:
                continue
        elif kind in ("reduce", "reduce_nokeep"):
            if len(shape) != 2:
                continue
            keep = kind == "reduce"
            op = draw(st.sampled_from(["Sum", "Max"]))
            axis = draw(st.sampled_from([-1, -1, -1, 0]))  # mostly row reductions
            inputs = [a, _const(g, f"{name}/axis", np.array(axis, np.int32))]
            attrs |= {"keep_dims": keep, "Tidx": DType("int32")}
            kept = shape[0] if axis == -1 else shape[1]
            out = ((kept, 1) if axis == -1 else (1, kept)) if keep else (kept,)
        elif kind == "expand":
            if len(shape) != 1:
                continue
            op, out = "ExpandDims", (shape[0], 1)
            inputs = [a, _const(g, f"{name}/dim", np.array(-1, np.int32))]
        else:
            if len(shape) != 2:
                continue
            w = _const(g, f"{name}/w", np.ones((shape[1], cols), np.float32))
            op, inputs, out = "MatMul", [a, w], (shape[0], cols)
        g.add(Node(name, op, inputs, attrs, [TensorInfo(F32, out)], controls))
        values.append(TensorRef(name))
    read = {r for n in g for r in n.inputs}
    g.outputs = [v for v in values[1:] if v not in read] or [values[-1]]
    return g


def _contracted_edges(g: Graph, rep: dict[str, str]) -> set[tuple[str, str]]:
    edges = set()
    for node in g:
        for pred in [r.node for r in node.inputs] + node.control_inputs:
            a, b = rep.get(pred, pred), rep.get(node.name, node.name)
            if a != b:
                edges.add((a, b))
    return edges


def _is_acyclic(nodes: set[str], edges: set[tuple[str, str]]) -> bool:
    indegree = dict.fromkeys(nodes, 0)
    for _, b in edges:
        indegree[b] += 1
    ready = [n for n, d in indegree.items() if d == 0]
    seen = 0
    while ready:
        n = ready.pop()
        seen += 1
        for a, b in edges:
            if a == n:
                indegree[b] -= 1
                if indegree[b] == 0:
                    ready.append(b)
    return seen == len(nodes)


@settings(
    max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(random_graphs(), st.sampled_from([1, 2]))
def test_groups_never_create_cycles(g: Graph, min_ops: int) -> None:
    """Contracting every group leaves the graph acyclic. (Groups need not be connected: sibling
    fusion joins groups that share an input or sit in the same layer.)"""
    plan = plan_groups(g, PlannerOptions(min_compute_ops=min_ops))
    rep = {name: f"group{grp.id}" for grp in plan.groups for name in grp.names}
    assert len(rep) == sum(len(grp.names) for grp in plan.groups), "a node is in two groups"
    nodes = {rep.get(n.name, n.name) for n in g}
    assert _is_acyclic(nodes, _contracted_edges(g, rep))
    for grp in plan.groups:
        assert not any(g.node(n).control_inputs for n in grp.names)
        for node in (g.node(n) for n in grp.names if g.node(n).op == "MatMul"):
            assert not {r.node for r in node.inputs} & set(grp.names), "a matmul operand in-group"
        emit_cpu(lower(g, grp, f"k{grp.id}"))  # every planned group can be lowered


def _node(
    name: str, op: str, inputs: list[str], shape: tuple[int, ...] = (4, 4), **attrs: Any
) -> Node:
    return Node(
        name,
        op,
        [TensorRef(i) for i in inputs],
        {"T": DType(F32), **attrs},
        [TensorInfo(F32, shape)],
    )


def _constant(name: str, value: np.ndarray) -> Node:
    dtype = str(value.dtype)
    attrs = {"value": TensorValue(value, dtype), "dtype": DType(dtype)}
    return Node(name, "Const", [], attrs, [TensorInfo(dtype, value.shape)])


def test_a_sibling_merge_through_a_later_node_back_into_a_group_is_refused() -> None:
    """Found by test_groups_never_create_cycles: merging n1 with n4 (same layer) made a cycle
    n1 -> n2 -> n5 -> n7, n7 in n3's group, n3 -> n4: the path left the walked window at n5,
    beyond the union's last member, and came back through a group that starts before it."""
    g = Graph()
    g.add(Node("x", "Placeholder", [], {"dtype": DType(F32)}, [TensorInfo(F32, (4, 4))]))
    g.add(_node("n0", "Exp", ["x"]))
    g.add(_node("n1", "AddV2", ["n0", "n0"]))
    g.add(_constant("n2/w", np.ones((4, 4), np.float32)))
    g.add(_node("n2", "MatMul", ["n1", "n2/w"]))
    g.add(_constant("n3/w", np.ones((4, 4), np.float32)))
    g.add(_node("n3", "MatMul", ["x", "n3/w"]))
    g.add(_constant("n4/axis", np.array(0, np.int32)))
    g.add(_node("n4", "Sum", ["n3", "n4/axis"], (1, 4), keep_dims=True, Tidx=DType("int32")))
    g.add(_constant("n5/axis", np.array(0, np.int32)))
    g.add(_node("n5", "Sum", ["n2", "n5/axis"], (4,), keep_dims=False, Tidx=DType("int32")))
    g.add(_node("n6", "Exp", ["x"]))
    g.add(_node("n7", "AddV2", ["n3", "n5"]))
    g.inputs = [TensorRef("x")]
    g.outputs = [TensorRef("n4"), TensorRef("n6"), TensorRef("n7")]
    plan = plan_groups(g, PlannerOptions(min_compute_ops=1))
    rep = {name: f"group{grp.id}" for grp in plan.groups for name in grp.names}
    assert _is_acyclic({rep.get(n.name, n.name) for n in g}, _contracted_edges(g, rep))
