"""packed-accumulators: on a CPU, the values one trip of a forward loop saves for its gradient
loop go as one tensor (one push, one pop a trip) where their sizes are proven to fit together;
values of unrelated unknown sizes, or of another dtype, stay apart; a GPU's plan never packs.
Answers stay TensorFlow's."""

from __future__ import annotations

from collections import Counter

import keras
import numpy as np
import tensorflow as tf

import tf_stitch
from tf_stitch.launches.op_launches import count_tf_launches
from tf_stitch.passes.packed_accumulators import has_packed_accumulators


def _lstm_grads() -> tf.types.experimental.ConcreteFunction:
    keras.utils.set_random_seed(5)
    layer = keras.layers.LSTM(8)
    layer(tf.zeros([1, 5, 6]))

    @tf.function(input_signature=[tf.TensorSpec([None, 5, 6])])
    def grads(x: tf.Tensor) -> list[tf.Tensor]:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(layer(x)))
        return [loss, *tape.gradient(loss, layer.trainable_variables)]

    return grads.get_concrete_function()


def _packed(optimized: object) -> list[str]:
    records = optimized.context.records  # type: ignore[attr-defined]
    return [r.decision.reason for r in records if r.subject.startswith("packed-accumulators")]


def _list_ops(fn: object, inputs: list[tf.Tensor]) -> Counter[str]:
    by_type = count_tf_launches(fn, inputs, steps=1, warmup=1).by_type
    return Counter({k: v for k, v in by_type.items() if k.startswith("TensorList")})


def test_an_lstms_gradient_loop_pops_one_tensor_a_trip_and_matches() -> None:
    concrete = _lstm_grads()
    optimized = tf_stitch.optimize(concrete)
    assert _packed(optimized) and has_packed_accumulators(optimized.context.records)
    for batch in (4, 1):
        x = tf.random.stateless_normal([batch, 5, 6], seed=[batch, 2])
        for a, b in zip(concrete(x), optimized(x), strict=True):
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-4, atol=1e-5)
    x = tf.random.stateless_normal([3, 5, 6], seed=[3, 3])
    ops = _list_ops(optimized, [x])
    assert ops["TensorListPushBack"] == ops["TensorListPopBack"] == 5  # one a trip, 5 trips


def test_a_gpu_plan_keeps_its_lists_apart() -> None:
    optimized = tf_stitch.optimize(_lstm_grads(), conv_layout="NCHW")
    assert not _packed(optimized)
    assert not has_packed_accumulators(optimized.context.records)


def test_values_of_unrelated_unknown_sizes_are_not_packed_together() -> None:
    """Two inputs whose batches nothing relates: each trip saves a value of each, which may
    differ in size on every axis but the last; both are saved, apart."""

    @tf.function(
        input_signature=[tf.TensorSpec([None, 4]), tf.TensorSpec([None, 4]), tf.TensorSpec([4])]
    )
    def grads(a: tf.Tensor, b: tf.Tensor, w: tf.Tensor) -> list[tf.Tensor]:
        with tf.GradientTape() as tape:
            tape.watch(w)

            def body(i: tf.Tensor, sa: tf.Tensor, sb: tf.Tensor) -> tuple[tf.Tensor, ...]:
                ha, hb = tf.sin(sa * w + a), tf.sin(sb * w + b)
                return i + 1, ha, hb

            _, sa, sb = tf.while_loop(lambda i, *_: i < 3, body, [0, a, b])
            loss = tf.reduce_sum(sa) + tf.reduce_sum(sb)
        return [loss, tape.gradient(loss, w)]

    concrete = grads.get_concrete_function()
    optimized = tf_stitch.optimize(concrete)
    args = [
        tf.random.stateless_normal([3, 4], seed=[1, 1]),
        tf.random.stateless_normal([5, 4], seed=[1, 2]),
        tf.random.stateless_normal([4], seed=[1, 3]),
    ]
    for x, y in zip(concrete(*args), optimized(*args), strict=True):
        np.testing.assert_allclose(y.numpy(), x.numpy(), rtol=1e-5, atol=1e-6)
    # the shapes the gradient's broadcasts read (int32 [2], known sizes) go together; the
    # float values of either batch (no class proves them equal) stay apart
    assert _packed(optimized) == [
        "4 values (int32, last axis 2+2+2+2) pushed and popped as one tensor (packed on a CPU only)"
    ]
