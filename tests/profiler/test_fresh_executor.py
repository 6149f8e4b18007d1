"""Counting in a fresh instantiation: ops an executor had stopped tracing are counted again."""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.eager import context

from tf_stitch.launches.op_launches import count_tf_launches
from tf_stitch.profiler.measure.fresh_executor import fresh_instantiations

TRIPS = 300


@tf.function
def tanh_loop(x: tf.Tensor) -> tf.Tensor:
    def body(i: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return i + 1, tf.tanh(y * 2.0 + 1.0)

    return tf.while_loop(lambda i, y: i < TRIPS, body, (tf.constant(0), x))[1]


@tf.function
def small_chain(x: tf.Tensor) -> tf.Tensor:
    for _ in range(3):
        x = tf.tanh(x * 2.0 + 1.0)
    return x


def test_loop_run_untraced_before_counts_every_trip() -> None:
    x = tf.ones([4, 8])
    for _ in range(3):  # 900 untraced runs of each body op: the executor deems them cheap
        tanh_loop(x)
    result = count_tf_launches(tanh_loop, [x])
    # per trip: i + 1, the loop's own counter, y * 2, + 1, tanh; the condition once more
    assert result.by_type == {"AddV2": 3 * TRIPS, "Less": TRIPS + 1, "Mul": TRIPS, "Tanh": TRIPS}
    assert result.consistent


def test_function_called_many_times_before_counts_every_op() -> None:
    x = tf.ones([4, 8])
    for _ in range(200):
        small_chain(x)
    result = count_tf_launches(small_chain, [x], steps=2)
    assert result.by_type == {"AddV2": 3, "Mul": 3, "Tanh": 3}
    assert result.consistent


def test_scope_is_unique_and_restores_the_callers_options() -> None:
    ctx = context.context()
    before = ctx.function_call_options.config_proto_serialized
    with fresh_instantiations() as first, fresh_instantiations() as second:
        assert first != second
        assert ctx.function_call_options.config_proto_serialized != before
    assert ctx.function_call_options.config_proto_serialized == before
