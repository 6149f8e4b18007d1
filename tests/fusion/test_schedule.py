"""schedule: a group's (kind, split_dim, domain) and the level (stage) of each value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from tf_stitch.fusion.planner import Group, plan_groups
from tf_stitch.fusion.schedule import Schedule, levels, schedule_of
from tf_stitch.graph import frontends
from tf_stitch.graph.ir import Graph

S = tf.TensorSpec


def only_group(fn: Callable[..., Any], *specs: tf.TensorSpec) -> tuple[Graph, Group]:
    graph = frontends.load(tf.function(fn).get_concrete_function(*specs)).graph
    (group,) = plan_groups(graph).groups
    return graph, group


def level_by_node(graph: Graph, group: Group) -> dict[str, int]:
    return {ref.node: lvl for ref, lvl in levels(graph, group.nodes).items()}


def layer_norm(x: tf.Tensor) -> tf.Tensor:
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.square(x - m), -1, keepdims=True)
    return (x - m) * tf.math.rsqrt(v + 1e-5)


def test_layer_norm_levels_count_reductions_on_the_longest_input_path() -> None:
    graph, group = only_group(layer_norm, S([None, 64]))
    lv = level_by_node(graph, group)
    assert lv["Mean"] == 1  # available after loop 0
    assert lv["sub"] == lv["Square"] == 1  # computed in loop 1
    assert lv["Mean_1"] == lv["add"] == lv["Rsqrt"] == 2
    assert lv["mul"] == 2  # the output is written in loop 2
    assert group.level == levels(graph, group.nodes)


def test_layer_norm_schedule_is_one_row_per_unit() -> None:
    _, group = only_group(layer_norm, S([None, 64]))
    sched = group.schedule
    assert sched == Schedule("row", 1, (None, 64))
    assert (sched.units, sched.row) == ((None,), (64,))
    assert str(sched) == "row(split_dim=1, domain=[?,64], blocks=[?])"


def test_elementwise_values_all_live_in_stage_zero() -> None:
    graph, group = only_group(lambda x, b: tf.nn.relu(x + b) * 2.0, S([4, 2048]), S([2048]))
    assert set(level_by_node(graph, group).values()) == {0}
    assert group.schedule == Schedule("loop", 1, (4, 2048))
    assert str(group.schedule) == "loop(split_dim=1, domain=[4,2048], blocks=[4])"


def test_softmax_exp_is_computed_before_its_sum_and_divided_after() -> None:
    def softmax(x: tf.Tensor) -> tf.Tensor:
        e = tf.exp(x - tf.reduce_max(x, -1, keepdims=True))
        return e / tf.reduce_sum(e, -1, keepdims=True)

    graph, group = only_group(softmax, S([8, 128]))
    lv = level_by_node(graph, group)
    assert (lv["Max"], lv["sub"], lv["Exp"], lv["Sum"], lv["truediv"]) == (1, 1, 1, 2, 2)


def test_schedule_of_copies_the_layout() -> None:
    _, group = only_group(lambda x: tf.exp(x) * tf.reduce_sum(x, [1, 2], True), S([2, 3, 4]))
    assert schedule_of(group.layout) == Schedule("row", 1, (2, 3, 4))
    assert group.schedule.row == (3, 4)
