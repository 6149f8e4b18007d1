"""legality: one negative test per rule (`test_does_not_fuse_when_...`), plus positive cases."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

from tf_stitch.fusion import op_kinds
from tf_stitch.fusion.decision import Decision
from tf_stitch.fusion.legality import Context, is_stateful, node_legality
from tf_stitch.fusion.op_kinds import OpKind, OpSpec
from tf_stitch.fusion.planner import Plan, plan_groups
from tf_stitch.graph import frontends
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef

S = tf.TensorSpec


def graph_of(fn: Callable[..., Any], *specs: tf.TensorSpec) -> Graph:
    return frontends.load(tf.function(fn).get_concrete_function(*specs)).graph


def verdict(graph: Graph, name: str) -> Decision:
    return node_legality(Context(graph), graph.node(name))


def grouped(plan: Plan) -> set[str]:
    return {name for g in plan.groups for name in g.names}


def assert_not_fused(graph: Graph, name: str, reason: str) -> None:
    """`name` is refused with `reason`, that reason is recorded, and it ends in no group."""
    v = verdict(graph, name)
    assert not v and v.reason == reason, v
    plan = plan_groups(graph)
    assert name not in grouped(plan)
    op = graph.node(name).op
    assert f"node {name} ({op}): forbid({reason})" in [str(r) for r in plan.records]


def merge_records(plan: Plan) -> list[str]:
    return [str(r) for r in plan.records if r.subject.startswith("merge ")]


def hand_graph(op: str, monkeypatch: pytest.MonkeyPatch, kind: OpKind) -> Graph:
    """x -> op -> Exp, with `op` entered into the op table as `kind`."""
    monkeypatch.setitem(op_kinds.OP_TABLE, op, OpSpec(kind, 1))
    f32 = TensorInfo("float32", (4, 8))
    g = Graph()
    g.add(Node("x", "Placeholder", attrs={"dtype": DType("float32")}, outputs=[f32]))
    operands = [TensorRef("x")] * (2 if kind is OpKind.BATCH_MATMUL else 1)  # well formed
    g.add(Node("y", op, operands, {"T": DType("float32")}, [f32]))
    g.add(Node("z", "Exp", [TensorRef("y")], {"T": DType("float32")}, [f32]))
    g.inputs, g.outputs = [TensorRef("x")], [TensorRef("z")]
    return g


# -- node rules ---------------------------------------------------------------------------------
def test_does_not_fuse_when_the_op_is_opaque() -> None:
    graph = graph_of(lambda x: tf.exp(tf.math.cumsum(tf.exp(x))), S([4, 8]))
    assert_not_fused(graph, "Cumsum", "Cumsum is opaque to the fuser")


def test_does_not_fuse_when_the_op_kind_is_not_stitched_yet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    graph = hand_graph("BatchMatMulV2", monkeypatch, OpKind.BATCH_MATMUL)
    assert_not_fused(graph, "y", "BatchMatMulV2 (batch_matmul) is not stitched yet")


def test_does_not_fuse_a_transpose_by_a_permutation_known_only_at_run_time() -> None:
    graph = graph_of(lambda x, p: tf.exp(tf.transpose(tf.exp(x), p)), S([4, 8]), S([2], tf.int32))
    assert_not_fused(graph, "transpose", "Transpose permutation is not a constant")


def test_does_not_fuse_when_the_op_is_stateful(monkeypatch: pytest.MonkeyPatch) -> None:
    assert is_stateful("RandomStandardNormal") and is_stateful("NoSuchOpAnywhere")
    graph = hand_graph("RandomStandardNormal", monkeypatch, OpKind.ELEMENTWISE)
    assert_not_fused(graph, "y", "RandomStandardNormal is stateful")


def control_edge_graph() -> Graph:
    def fn(x: tf.Tensor) -> Any:
        a = tf.exp(x, name="a")
        with tf.control_dependencies([a]):
            b = tf.tanh(x, name="b")
        return b * 2.0, a + 1.0

    return graph_of(fn, S([4, 8]))


def test_does_not_fuse_when_the_node_has_control_inputs() -> None:
    reason = "has control inputs (a control edge would cross the kernel)"
    assert_not_fused(control_edge_graph(), "b", reason)


def test_does_not_fuse_when_the_node_is_the_source_of_a_control_edge() -> None:
    assert_not_fused(control_edge_graph(), "a", "is the source of a control edge")


def test_does_not_fuse_when_an_output_is_fed() -> None:
    cf = tf.function(lambda x: tf.tanh(tf.exp(x) * 2.0)).get_concrete_function(S([4, 8]))
    gd = cf.graph.as_graph_def()
    graph = frontends.load(gd, inputs=["x:0", "Exp:0"], outputs=["Tanh:0"]).graph
    assert_not_fused(graph, "Exp", "output 0 is fed, so its producer must stay")
    assert grouped(plan_groups(graph)) == {"mul", "Tanh", "Identity"}


def test_does_not_fuse_when_the_output_dtype_is_not_fusible() -> None:
    graph = graph_of(lambda x: (x + 1) * 2, S([4, 8], tf.complex64))
    assert_not_fused(graph, "add", "output dtype complex64 is not fused yet")


def test_does_not_fuse_when_an_input_dtype_is_not_fusible() -> None:
    graph = graph_of(lambda x: tf.exp(tf.cast(x, tf.float32)), S([4, 8], tf.complex64))
    assert_not_fused(graph, "Cast", "input x:0 has dtype complex64, not fused yet")


def test_an_integer_converted_to_float_is_fused() -> None:
    """A mean's count, an embedding's ids: the kernel loads the integer and converts it."""
    for dtype in (tf.int32, tf.int64, tf.uint8, tf.int8):
        graph = graph_of(lambda x: tf.exp(tf.cast(x, tf.float32)) * 2.0, S([4, 8], dtype))
        (group,) = plan_groups(graph).groups
        assert {n.op for n in group.nodes} >= {"Cast", "Exp", "Mul"}


def test_does_not_fuse_when_the_output_rank_is_unknown() -> None:
    graph = graph_of(lambda x: tf.exp(x) * 2.0, S(None))
    assert_not_fused(graph, "Exp", "output rank is unknown")


def test_does_not_fuse_when_an_input_rank_is_unknown() -> None:
    graph = graph_of(lambda x: tf.exp(tf.reshape(x, [-1])), S(None))
    assert_not_fused(graph, "Reshape", "input x:0 has an unknown rank")


def test_does_not_fuse_when_reduction_axes_are_not_constant() -> None:
    def fn(x: tf.Tensor, a: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(tf.exp(x), a, keepdims=True)  # the rank stays known

    graph = graph_of(fn, S([4, 8]), S([], tf.int32))
    assert_not_fused(graph, "Sum", "reduction axes are not a constant")


def test_does_not_fuse_when_a_reshape_target_is_not_constant() -> None:
    graph = graph_of(lambda x, s: tf.reshape(tf.exp(x), s) + 1.0, S([4, 8]), S([2], tf.int32))
    assert_not_fused(graph, "Reshape", "Reshape target is not a constant")


def test_does_not_fuse_when_a_broadcast_target_is_not_constant() -> None:
    graph = graph_of(lambda x, s: tf.broadcast_to(tf.exp(x), s) + 1.0, S([8]), S([2], tf.int32))
    assert_not_fused(graph, "BroadcastTo", "BroadcastTo target is not a constant")


def test_does_not_fuse_when_select_has_a_lower_rank_condition() -> None:
    def fn(c: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
        return tf.raw_ops.Select(condition=c, x=tf.exp(x), y=x) * 2.0

    graph = graph_of(fn, S([4], tf.bool), S([4, 8]))
    assert_not_fused(graph, "Select", "Select with a lower-rank condition selects whole rows")


def test_does_not_fuse_when_equal_tolerates_incompatible_shapes() -> None:
    def fn(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        return tf.raw_ops.Equal(x=tf.exp(x), y=y, incompatible_shape_error=False)

    graph = graph_of(fn, S([4, 8]), S([4, 8]))
    assert_not_fused(graph, "Equal", "Equal with incompatible_shape_error=False")


# -- group rules ----------------------------------------------------------------------------------
def test_does_not_fuse_when_the_merge_crosses_devices() -> None:
    graph = graph_of(lambda x: tf.tanh(tf.exp(x)), S([4, 8]))
    graph.node("Tanh").device = "/device:CPU:1"
    plan = plan_groups(graph)
    assert "merge Exp -> Tanh: forbid(crosses devices ['', '/device:CPU:1'])" in merge_records(plan)
    assert not any({"Exp", "Tanh"} <= set(g.names) for g in plan.groups)


def test_does_not_fuse_ops_pinned_to_a_gpu() -> None:
    graph = graph_of(lambda x: tf.tanh(tf.exp(x)), S([4, 8]))
    graph.node("Tanh").device = "/device:GPU:0"
    plan = plan_groups(graph)
    assert any("placed on /device:GPU:0" in str(r) for r in plan.records)
    assert not any("Tanh" in g.names for g in plan.groups)


def test_does_not_fuse_when_an_output_would_be_written_by_several_units() -> None:
    # exp(b) is needed outside, but the [4,8] group would compute it once per row
    def fn(x: tf.Tensor, b: tf.Tensor) -> Any:
        e = tf.exp(b)
        return x + e, e * 3.0

    graph = graph_of(fn, S([4, 8]), S([8]))
    plan = plan_groups(graph)
    refused = [r for r in merge_records(plan) if "would be written by several units" in r]
    assert refused and all("of the [4,8] domain" in r for r in refused)
    for group in plan.groups:
        assert not {"Exp", "add"} <= set(group.names)


# -- positive cases -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn, specs",
    [
        (lambda x: tf.exp(x) * 2.0, [S([4, 8])]),
        (lambda x: tf.nn.leaky_relu(x, 0.1), [S([None, 8])]),
        (lambda c, x: tf.raw_ops.Select(condition=c, x=x, y=-x), [S([4, 8], tf.bool), S([4, 8])]),
        (lambda c, x: tf.where(c, x, -x), [S([4, 1], tf.bool), S([4, 8])]),
        (lambda x: tf.cast(x > 0.0, tf.float32), [S([4, 8])]),
        (lambda x: tf.reshape(x, [32]), [S([4, 8])]),
        (lambda x: tf.reduce_max(x, -1), [S([4, 8])]),
    ],
)
def test_fusible_nodes_are_allowed(fn: Callable[..., Any], specs: list[tf.TensorSpec]) -> None:
    graph = graph_of(fn, *specs)
    ctx = Context(graph)
    compute = [n for n in graph if n.op not in ("Placeholder", "Const", "Identity")]
    assert compute
    for node in compute:
        assert node_legality(ctx, node), (node.name, node_legality(ctx, node))


def test_a_row_group_may_write_one_value_per_row_and_a_dense_output() -> None:
    def fn(x: tf.Tensor) -> Any:
        s = tf.reduce_sum(tf.exp(x), -1, keepdims=True)
        return s, tf.exp(x) / s

    plan = plan_groups(graph_of(fn, S([4, 8])))
    (group,) = plan.groups
    assert group.layout.kind == "row"
    assert len(group.outputs) == 2
    assert [group.layout.is_row_level(r) for r in group.outputs].count(True) == 1


def test_constant_feeds_do_not_count_as_fed_outputs() -> None:
    graph = graph_of(lambda x: tf.exp(x) * np.float32(2.0), S([4, 8]))
    ctx = Context(graph)
    assert ctx.fed == {TensorRef("x")}
    assert verdict(graph, "Exp") and verdict(graph, "mul")


def test_tiles_of_size_one_axes_are_broadcasts_and_others_are_refused() -> None:
    graph = graph_of(lambda x: tf.exp(tf.tile(x, [1, 5, 1])) * 2.0, S([4, 1, 8]))
    assert verdict(graph, "Tile")
    graph = graph_of(lambda x: tf.exp(tf.tile(x, [1, 2, 1])) * 2.0, S([4, 3, 8]))
    assert_not_fused(graph, "Tile", "Tile repeats an axis longer than 1 (not a broadcast)")
