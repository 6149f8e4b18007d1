"""memory_plan: which values that cross a stage are buffered on chip and which are recomputed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from tf_stitch.fusion.memory_plan import DEFAULT_BUDGET_BYTES, MemoryPlan, plan_memory
from tf_stitch.fusion.planner import Group, PlannerOptions, plan_groups
from tf_stitch.graph import frontends
from tf_stitch.graph.ir import Graph

S = tf.TensorSpec


def only_group(
    fn: Callable[..., Any], *specs: tf.TensorSpec, budget: int = DEFAULT_BUDGET_BYTES
) -> tuple[Graph, Group]:
    graph = frontends.load(tf.function(fn).get_concrete_function(*specs)).graph
    (group,) = plan_groups(graph, PlannerOptions(on_chip_budget=budget)).groups
    return graph, group


def by_node(plan: MemoryPlan) -> dict[str, str]:
    return {ref.node: str(d) for ref, d in plan.decisions.items()}


def replan(graph: Graph, group: Group, budget: int) -> MemoryPlan:
    return plan_memory(graph, group.nodes, group.layout, group.level, budget)


def softmax(x: tf.Tensor) -> tf.Tensor:
    e = tf.exp(x - tf.reduce_max(x, -1, keepdims=True))
    return e / tf.reduce_sum(e, -1, keepdims=True)


def layer_norm(x: tf.Tensor) -> tf.Tensor:
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.square(x - m), -1, keepdims=True)
    return (x - m) * tf.math.rsqrt(v + 1e-5)


def two_exps(x: tf.Tensor) -> tf.Tensor:
    """Two per-element values read after the reduction: exp(x) (cost 16), exp(tanh(x)) (32)."""
    cheap, dear = tf.exp(x), tf.exp(tf.tanh(x))
    s = tf.reduce_sum(cheap + dear, -1, keepdims=True)
    return cheap / s + dear / s


def test_the_default_budget_is_20_kb() -> None:
    assert DEFAULT_BUDGET_BYTES == 20 * 1024
    assert PlannerOptions().on_chip_budget == DEFAULT_BUDGET_BYTES


def test_cheap_values_are_recomputed() -> None:
    _, group = only_group(layer_norm, S([None, 64]))
    assert by_node(group.memory) == {"sub_1": "forbid(cheap: cost 1)"}
    assert group.memory.buffered == {}
    assert group.memory.bytes_per_block == 0


def test_expensive_values_are_buffered_one_row_at_a_time() -> None:
    _, group = only_group(softmax, S([8, 128]))
    assert by_node(group.memory) == {"Exp": "allow(cost 17, 512 B)"}
    assert [r.node for r in group.memory.buffered] == ["Exp"]
    assert group.memory.bytes_per_block == 128 * 4
    assert str(group.memory) == "512 B on chip per block; Exp:0: buffer (cost 17, 512 B)"


def test_shrink_recomputes_what_does_not_fit_a_small_budget() -> None:
    _, group = only_group(softmax, S([8, 128]), budget=100)
    assert group.memory.buffered == {}
    assert by_node(group.memory) == {"Exp": "forbid(shrunk: 512 B over the 100 B on-chip budget)"}


def test_shrink_recomputes_the_cheapest_buffered_value_first() -> None:
    graph, group = only_group(two_exps, S([8, 128]))
    assert {r.node for r in group.memory.buffered} == {"Exp", "Exp_1"}
    assert group.memory.bytes_per_block == 1024
    plan = replan(graph, group, budget=600)
    assert {r.node for r in plan.buffered} == {"Exp_1"}  # exp(tanh(x)) costs more to recompute
    assert by_node(plan)["Exp"] == "forbid(shrunk: 512 B over the 600 B on-chip budget)"
    assert by_node(plan)["Exp_1"] == "allow(cost 32, 512 B)"
    assert plan.bytes_per_block <= 600


def test_a_budget_that_fits_exactly_shrinks_nothing() -> None:
    graph, group = only_group(two_exps, S([8, 128]))
    assert replan(graph, group, budget=1024).bytes_per_block == 1024
    assert replan(graph, group, budget=1023).bytes_per_block == 512
    assert replan(graph, group, budget=511).bytes_per_block == 0


def test_unknown_row_size_is_never_buffered() -> None:
    _, group = only_group(softmax, S([8, None]))
    assert group.memory.buffered == {}
    assert by_node(group.memory) == {"Exp": "forbid(row size unknown until run time)"}


def test_unknown_batch_size_does_not_matter() -> None:
    _, group = only_group(softmax, S([None, 128]))
    assert group.memory.bytes_per_block == 512


def test_bool_values_take_one_byte_per_element() -> None:
    def fn(x: tf.Tensor) -> tf.Tensor:
        mask = tf.exp(x) > 1.0  # cost 17: worth buffering
        s = tf.reduce_sum(x, -1, keepdims=True)
        return tf.where(mask, x - s, x)

    _, group = only_group(fn, S([8, 64]))
    assert by_node(group.memory) == {"Greater": "allow(cost 17, 64 B)"}


def test_a_group_without_stages_has_nothing_to_plan() -> None:
    _, group = only_group(lambda x: tf.exp(x) * 2.0, S([8, 128]))
    assert group.memory.decisions == {}
    assert str(group.memory) == "no value crosses a stage"


def test_values_read_only_by_their_own_reduction_do_not_cross() -> None:
    _, group = only_group(lambda x: tf.reduce_sum(tf.exp(x) * 2.0, -1), S([8, 128]))
    assert group.memory.decisions == {}
