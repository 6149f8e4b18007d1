"""Sibling fusion: shared-input and same-layer groups become one multi-output kernel."""

from __future__ import annotations

import tensorflow as tf
from conftest import assert_close, random_inputs

import tf_stitch
from tf_stitch.fusion.planner import PlannerOptions, plan_groups
from tf_stitch.graph.frontends import load

S = tf.TensorSpec


def _plan(fn, *specs):  # type: ignore[no-untyped-def]
    return plan_groups(load(tf.function(fn).get_concrete_function(*specs)).graph)


def test_consumers_of_one_tensor_share_a_kernel() -> None:
    plan = _plan(lambda x: (tf.exp(x) + 1.0, tf.tanh(x) * 2.0), S([None, 16]))
    assert len(plan.groups) == 1
    assert len(plan.groups[0].outputs) == 2
    assert any("sibling (shares x:0)" in str(r) for r in plan.records)


def test_independent_groups_of_one_layer_share_a_kernel() -> None:
    def fn(a: tf.Tensor, b: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return tf.nn.relu(a * 2.0 + 1.0), tf.sigmoid(b) * 3.0 - 1.0

    plan = _plan(fn, S([4, 8]), S([4, 8]))
    assert len(plan.groups) == 1 and len(plan.groups[0].outputs) == 2
    assert any("independent, same layer" in str(r) for r in plan.records)


def test_large_independent_groups_share_a_kernel_on_a_gpu_only() -> None:
    """On a CPU TensorFlow runs independent kernels side by side; one kernel would wait for
    the later of their inputs."""

    def fn(a: tf.Tensor, b: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return tf.nn.relu(a * 2.0 + 1.0), tf.sigmoid(b) * 3.0 - 1.0

    graph = load(tf.function(fn).get_concrete_function(S([64, 1024]), S([64, 1024]))).graph
    cpu = plan_groups(graph)
    assert len(cpu.groups) == 2
    assert any("run side by side" in str(r) for r in cpu.records)
    gpu = plan_groups(graph, PlannerOptions(gpu=True))
    assert len(gpu.groups) == 1 and len(gpu.groups[0].outputs) == 2


def test_independent_groups_of_unrelated_unknown_sizes_stay_apart() -> None:
    def fn(a: tf.Tensor, b: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return tf.nn.relu(a * 2.0 + 1.0), tf.sigmoid(b) * 3.0 - 1.0

    plan = _plan(fn, S([None, 8]), S([None, 8]))
    assert len(plan.groups) == 2
    assert any("does not prove equal" in str(r) for r in plan.records)


def test_independent_groups_of_one_unknown_batch_share_a_kernel() -> None:
    def fn(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        a, b = x[:, :8], x[:, 8:]
        return tf.nn.relu(a * 2.0 + 1.0), tf.sigmoid(b) * 3.0 - 1.0

    plan = _plan(fn, S([None, 16]))
    assert len(plan.groups) == 1 and len(plan.groups[0].outputs) == 2


def test_groups_of_different_layers_stay_apart() -> None:
    def fn(a: tf.Tensor, w: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        h = tf.tanh(a) * 2.0
        return tf.exp(tf.matmul(h, w)) + 1.0, tf.sigmoid(a + 1.0) * 3.0

    plan = _plan(fn, S([None, 8]), S([8, 8]))
    groups = [set(g.names) for g in plan.groups]
    assert len(groups) == 2  # tanh/mul (+ sigmoid siblings of `a`) and exp/add after the matmul
    assert not any({"Exp", "Tanh"} <= g for g in groups)


def test_different_domains_are_not_siblings() -> None:
    plan = _plan(lambda x, y: (tf.exp(x) * 2.0, tf.exp(y) * 2.0), S([None, 8]), S([None, 9]))
    assert len(plan.groups) == 2


def test_lone_bias_adds_of_library_matmuls_are_left_to_tensorflow() -> None:
    def fn(x: tf.Tensor, w1: tf.Tensor, w2: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return tf.matmul(x, w1) + tf.ones([640]), tf.matmul(x, w2) + tf.ones([640])

    sig = [S([None, 512]), S([512, 640]), S([512, 640])]  # too large for tiles
    plan = _plan(fn, *sig)
    assert plan.groups == []
    assert any("TensorFlow fuses those into the library call" in str(r) for r in plan.records)


def test_small_matmuls_and_their_bias_adds_are_one_kernel() -> None:
    def fn(x: tf.Tensor, w1: tf.Tensor, w2: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return tf.matmul(x, w1) + tf.ones([8]), tf.matmul(x, w2) + tf.ones([8])

    plan = _plan(fn, S([None, 8]), S([8, 8]), S([8, 8]))
    assert len(plan.groups) == 1 and len(plan.groups[0].outputs) == 2  # TensorFlow: 2 launches


def test_multi_output_sibling_kernels_compute_the_same_values() -> None:
    def fn(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        s = tf.nn.softmax(x)
        return s, tf.reduce_max(x, -1) * 2.0, tf.nn.relu(x - 1.0)

    sig = [S([None, 12])]
    f = tf.function(fn, input_signature=sig)
    opt = tf_stitch.optimize(f)
    assert sum(n.op == "StitchedKernel" for n in opt.graph_def.node) == 1
    for batch in (1, 4):
        xs = random_inputs(sig, batch=batch)
        assert_close(f(*xs), opt(*xs))
