"""twin-counters: a loop whose own counter counts its trips like while_v2's counter (same start,
same step) tests and advances one of them; counters that start or step differently stay."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import tensorflow as tf

import tf_stitch
from tf_stitch.launches.op_launches import count_tf_launches

X = tf.random.stateless_normal([3, 4], seed=[7, 1])


def _loop(start: int, step: int) -> tf.types.experimental.ConcreteFunction:
    @tf.function(input_signature=[tf.TensorSpec([None, 4])])
    def f(x: tf.Tensor) -> list[tf.Tensor]:
        def body(t: tf.Tensor, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            return t + step, tf.tanh(h * 0.5 + x) * tf.cast(t, tf.float32)

        t, h = tf.while_loop(
            lambda t, h: t < start + 6 * step, body, [tf.constant(start), x], maximum_iterations=6
        )
        return [t, h]

    return f.get_concrete_function()


def _ops(fn: object) -> Counter[str]:
    return Counter(count_tf_launches(fn, [X], steps=1, warmup=1).by_type)


def _twins(optimized: object) -> list[str]:
    records = optimized.context.records  # type: ignore[attr-defined]
    return [r.decision.reason for r in records if r.subject.startswith("twin-counters")]


def test_a_loop_counting_its_trips_twice_counts_them_once() -> None:
    concrete = _loop(0, 1)
    optimized = tf_stitch.optimize(concrete)
    assert _twins(optimized) == ["1 loop variables count its trips twice"]
    for batch in (3, 1):
        x = tf.random.stateless_normal([batch, 4], seed=[batch, 5])
        for a, b in zip(concrete(x), optimized(x), strict=True):
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6)
    before, after = _ops(concrete), _ops(optimized)
    assert before["LogicalAnd"] == 7 and before["Less"] == 14  # 6 trips and the last test
    assert after["LogicalAnd"] == 0 and after["Less"] == 7
    assert after["AddV2"] == 6  # one count a trip (the body's float ops are a kernel)


@pytest.mark.parametrize(("start", "step"), [(1, 1), (0, 2)])
def test_counters_that_start_or_step_differently_stay(start: int, step: int) -> None:
    concrete = _loop(start, step)
    optimized = tf_stitch.optimize(concrete)
    assert not _twins(optimized)
    for a, b in zip(concrete(X), optimized(X), strict=True):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6)
    assert _ops(optimized)["LogicalAnd"] == 7
