"""dead-accumulators: a forward loop stops pushing what its stitched gradient loop no longer
pops; the gradients stay TensorFlow's, and lists read any other way are left alone."""

from __future__ import annotations

from collections import Counter

import keras
import numpy as np
import tensorflow as tf

import tf_stitch
from tf_stitch.passes.dead_accumulators import _popped_unread, _pushed_only
from tf_stitch.profiler.op_launches import count_tf_launches

F32 = tf.float32


def _lstm_gradients() -> tuple[tf.types.experimental.ConcreteFunction, list[tf.Tensor]]:
    keras.utils.set_random_seed(3)
    layer = keras.layers.LSTM(8)
    x = tf.random.stateless_normal([4, 5, 6], seed=[1, 2])
    layer(x)

    @tf.function(input_signature=[tf.TensorSpec([None, 5, 6])])
    def grads(x: tf.Tensor) -> list[tf.Tensor]:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(layer(x)))
        return [loss, *tape.gradient(loss, layer.trainable_variables)]

    return grads.get_concrete_function(), [x]


def _ops_per_step(fn: object, inputs: list[tf.Tensor]) -> Counter[str]:
    counted = count_tf_launches(fn, inputs, steps=1, warmup=1)
    return Counter(counted.by_type)


def test_an_lstms_gradient_loop_gets_only_what_it_reads_and_the_same_gradients() -> None:
    concrete, inputs = _lstm_gradients()
    optimized = tf_stitch.optimize(concrete)
    records = [r for r in optimized.context.records if r.subject.startswith("dead-accumulators")]
    assert records and "not pushed on every trip" in records[0].decision.reason
    expected, got = concrete(*inputs), optimized(*inputs)
    for a, b in zip(expected, got, strict=True):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-4, atol=1e-5)
    before, after = _ops_per_step(concrete, inputs), _ops_per_step(optimized, inputs)
    # every value pushed is popped: no push without a pop, on each of the 5 trips
    assert after["TensorListPushBack"] == after["TensorListPopBack"] > 0
    assert after["TensorListPushBack"] < before["TensorListPushBack"]


def _fdef(fn: object, *specs: tf.TensorSpec) -> object:
    return tf.function(fn).get_concrete_function(*specs).function_def


LIST = tf.TensorSpec([], tf.variant)
X = tf.TensorSpec([3], F32)


def _pop(handle: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return tf.raw_ops.TensorListPopBack(input_handle=handle, element_shape=[3], element_dtype=F32)


def test_a_push_is_seen_only_where_the_body_returns_its_list_with_that_push_alone() -> None:
    def pushes(handle: tf.Tensor, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return tf.raw_ops.TensorListPushBack(input_handle=handle, tensor=x * 2.0), x

    def pushes_and_reads(handle: tf.Tensor, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        length = tf.cast(tf.raw_ops.TensorListLength(input_handle=handle), F32)
        return tf.raw_ops.TensorListPushBack(input_handle=handle, tensor=x), x + length

    assert _pushed_only(_fdef(pushes, LIST, X), 0)
    assert not _pushed_only(_fdef(pushes, LIST, X), 1)  # not a list
    assert not _pushed_only(_fdef(pushes_and_reads, LIST, X), 0)  # its length is read too


def test_a_pop_is_dead_only_where_nothing_reads_what_it_pops() -> None:
    def pops_unread(handle: tf.Tensor, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        rest, _ = _pop(handle)
        return rest, x + 1.0

    def pops_and_reads(handle: tf.Tensor, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        rest, value = _pop(handle)
        return rest, x + value

    assert _popped_unread(_fdef(pops_unread, LIST, X)) == [0]
    assert _popped_unread(_fdef(pops_and_reads, LIST, X)) == []
