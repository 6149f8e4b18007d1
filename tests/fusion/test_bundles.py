"""Bundles: which independent elementwise groups are launched as one kernel."""

from __future__ import annotations

import tensorflow as tf

from tf_stitch.fusion.bundles import plan_bundles
from tf_stitch.fusion.decision import Record
from tf_stitch.fusion.planner import plan_groups
from tf_stitch.fusion.siblings import has_cpu_only_splits
from tf_stitch.graph.frontends import load

S = tf.TensorSpec


def _groups(fn, *specs):  # type: ignore[no-untyped-def]
    graph = load(tf.function(fn).get_concrete_function(*specs)).graph
    return graph, plan_groups(graph).groups


def test_groups_of_different_shapes_ready_together_are_one_bundle() -> None:
    def fn(a: tf.Tensor, b: tf.Tensor, c: tf.Tensor) -> tuple[tf.Tensor, ...]:
        return tf.tanh(a) * 2.0 + 1.0, tf.sigmoid(b) - b * b, tf.exp(c) * 0.5 - 1.0

    graph, groups = _groups(fn, S([3, 5]), S([7]), S([2, 2, 2]))
    assert len(groups) == 3  # one domain each: the planner cannot merge them
    assert plan_bundles(graph, groups) == [[0, 1, 2]]


def test_large_kernels_ready_together_are_bundled_for_a_gpu_only() -> None:
    """On a CPU TensorFlow's executor runs them side by side (fusion/siblings.py)."""

    def fn(a: tf.Tensor, b: tf.Tensor, c: tf.Tensor) -> tuple[tf.Tensor, ...]:
        return tf.tanh(a) * 2.0 + 1.0, tf.sigmoid(b) - b * b, tf.exp(c) * 0.5 - 1.0

    graph, groups = _groups(fn, S([64, 512]), S([128, 300]), S([3, 5]))
    assert len(groups) == 3
    records: list[Record] = []
    assert plan_bundles(graph, groups, gpu=True) == [[0, 1, 2]]
    assert plan_bundles(graph, groups, log=lambda s, d: records.append(Record(s, d)) or d) == []
    assert has_cpu_only_splits(records)


def test_a_group_that_reads_another_s_result_is_not_bundled_with_it() -> None:
    def fn(a: tf.Tensor, w: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        h = tf.tanh(a) * 2.0 + 1.0
        m = tf.reshape(tf.matmul(tf.reshape(h, [1, 15]), w), [4])  # a library call between
        return h, tf.exp(m) * 0.5 - 1.0

    graph, groups = _groups(fn, S([3, 5]), S([15, 4]))
    assert len(groups) == 2
    assert plan_bundles(graph, groups) == []


def test_updates_only_variable_writes_read_are_bundled_across_layers() -> None:
    w = tf.Variable(tf.ones([3, 5]))
    b = tf.Variable(tf.ones([3, 7]))
    k = tf.constant(tf.random.stateless_normal([5, 7], [1, 2]))

    def fn(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        w.assign(tf.tanh(x) * 0.5 - 1.0)  # ready at the start
        b.assign(tf.exp(tf.matmul(x, k)) * 2.0 - 1.0)  # ready after the matmul
        return tf.reduce_sum(y)

    cf = tf.function(fn).get_concrete_function(S([3, 5]), S([7]))
    graph = load(cf, freeze=False).graph
    groups = plan_groups(graph).groups
    readers = graph.consumers()
    writers = [
        i
        for i, g in enumerate(groups)
        if any(graph.node(c).op == "AssignVariableOp" for r in g.outputs for c in readers[r])
    ]
    assert len(writers) == 2
    assert any(set(writers) <= set(bundle) for bundle in plan_bundles(graph, groups))
