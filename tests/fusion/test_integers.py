"""The integer rules (fusion/integers.py): what a kernel leaves to TensorFlow and why."""

from __future__ import annotations

import tensorflow as tf
from fusion.test_legality import S, assert_not_fused, graph_of, grouped, verdict

from tf_stitch.fusion.integers import is_shape_arithmetic
from tf_stitch.fusion.planner import PlannerOptions, plan_groups


def test_integer_arithmetic_of_real_tensors_is_fused() -> None:
    graph = graph_of(lambda x: tf.bitwise.left_shift(x * 3 + 1, 2) // 5, S([None, 8], tf.int64))
    assert grouped(plan_groups(graph)) >= {"mul", "add", "LeftShift", "floordiv"}


def test_shape_arithmetic_stays_tensorflows() -> None:
    """A Shape's dims computed on: scalars and short vectors of integers."""

    def reshape(x: tf.Tensor) -> tf.Tensor:
        n = tf.shape(x)[0] * 2 + 1
        dims = tf.shape(x)[1:] * 3
        return (
            tf.reshape(x, [-1]) + tf.cast(n, tf.float32) + tf.cast(tf.reduce_sum(dims), tf.float32)
        )

    graph = graph_of(reshape, S([None, 4, 5], tf.float32))
    assert_not_fused(graph, "mul", "int32 shape arithmetic (a scalar) stays TensorFlow's")
    assert_not_fused(graph, "mul_1", "int32 shape arithmetic (2 elements) stays TensorFlow's")
    assert is_shape_arithmetic((16,)) and not is_shape_arithmetic((17,))
    assert not is_shape_arithmetic((None,)) and not is_shape_arithmetic((2, 2))


def test_an_integer_division_by_a_tensor_stays_tensorflows() -> None:
    """TensorFlow raises for a divisor of 0; a kernel divides by constants without zeros."""
    graph = graph_of(
        lambda x, y: tf.math.floordiv(x, y) + 1, S([4, 32], tf.int32), S([4, 32], tf.int32)
    )
    reason = "FloorDiv of int32 by a tensor that may be 0 (TensorFlow raises)"
    assert_not_fused(graph, "floordiv", reason)
    graph = graph_of(
        lambda x: tf.math.floormod(x, tf.constant([3, 0] * 16)) + 1, S([4, 32], tf.int32)
    )
    assert not verdict(graph, "FloorMod")
    graph = graph_of(
        lambda x: tf.math.floormod(x, tf.constant([3, -1] * 16)) + 1, S([4, 32], tf.int32)
    )
    assert verdict(graph, "FloorMod")


def test_a_narrowing_cast_is_fused_after_a_clamp_to_the_integers_range() -> None:
    def cast(
        low: float, high: float, rounding: bool = False
    ) -> tf.types.experimental.GenericFunction:
        def f(x: tf.Tensor) -> tf.Tensor:
            y = tf.clip_by_value(x * 2.0, low, high)
            return tf.cast(tf.round(y) if rounding else y, tf.uint8)

        return f

    spec = S([4, 32], tf.float32)
    assert verdict(graph_of(cast(0.0, 255.0), spec), "Cast")
    assert verdict(graph_of(cast(-0.9, 255.9), spec), "Cast")  # truncated toward zero
    assert not verdict(graph_of(cast(-1.0, 255.0), spec), "Cast")
    assert not verdict(graph_of(cast(0.0, 255.5, rounding=True), spec), "Cast")  # 256 rounded
    assert verdict(graph_of(cast(0.0, 255.4, rounding=True), spec), "Cast")
    reason = "a Cast of float32 to int8 that is not clamped to its range first"
    graph = graph_of(lambda x: tf.cast(x * 2.0, tf.int8), spec)
    assert reason in verdict(graph, "Cast").reason
    # to int32 and int64 every float has TensorFlow's one result
    assert verdict(graph_of(lambda x: tf.cast(x * 2.0, tf.int32), spec), "Cast")


def test_ops_tensorflow_computes_otherwise_stay_tensorflows() -> None:
    graph = graph_of(lambda x: tf.pow(x, tf.constant(2)) + 1, S([4, 32], tf.int32))
    assert_not_fused(graph, "Pow", "Pow of int32 is not fused")
    graph = graph_of(
        lambda x: tf.math.floormod(x, tf.constant(3.0, tf.float16)) * 2, S([4, 32], tf.float16)
    )
    assert_not_fused(
        graph, "FloorMod", "FloorMod of float16 (TensorFlow rounds the quotient first)"
    )
    graph = graph_of(lambda x: tf.math.floormod(x, 3.0) * 2, S([4, 32], tf.float32))
    assert verdict(graph, "FloorMod")


def test_on_a_gpu_int32_arithmetic_alone_stays_on_the_host() -> None:
    """TensorFlow's GPU kernels of int32 ops keep their arguments in host memory: a kernel of
    int32 ops alone would add a launch there. int64, or int32 beside floats, is stitched."""
    gpu = PlannerOptions(gpu=True)
    graph = graph_of(lambda x: (x * 3 + 1) // 2 - x, S([None, 64], tf.int32))
    assert grouped(plan_groups(graph)) >= {"mul", "add", "floordiv", "sub"}  # on the CPU
    plan = plan_groups(graph, gpu)
    assert not plan.groups
    assert any("TensorFlow runs them on the host" in str(r) for r in plan.records)
    graph = graph_of(lambda x: (x * 3 + 1) // 2 - x, S([None, 64], tf.int64))
    assert grouped(plan_groups(graph, gpu)) >= {"mul", "add", "floordiv", "sub"}
    buckets = graph_of(
        lambda x: (
            tf.minimum(tf.cast(tf.math.log(tf.cast(x, tf.float32) + 1.0) * 4.0, tf.int32), 7) + x
        ),
        S([None, 64], tf.int32),
    )
    assert grouped(plan_groups(buckets, gpu)) >= {"Cast", "Log", "Cast_1", "Minimum", "add_1"}
