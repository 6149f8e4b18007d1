"""profile(): run B traces every op of every step, also after run A's untraced steps made them
cheap in TensorFlow's executor (profiler/measure/fresh_executor.py; a loop's trips count as
runs)."""

from __future__ import annotations

import tensorflow as tf

import tf_stitch

TRIPS = 120


@tf.function(input_signature=[tf.TensorSpec([4, 8])])
def _loop(x: tf.Tensor) -> tf.Tensor:
    def body(i: tf.Tensor, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return i + 1, tf.tanh(h * 0.5 + 1.0)

    return tf.while_loop(lambda i, h: i < TRIPS, body, (tf.constant(0), x))[1]


def test_cheap_loop_ops_are_traced_in_every_step() -> None:
    x = tf.random.normal([4, 8])
    for _ in range(3):  # the function has run untraced before it is profiled
        _loop(x)
    p = tf_stitch.profile(_loop, x, steps=3, warmup=2, progress=None)
    ops = p.level("op")
    tanh_per_step = ops[ops.type == "Tanh"].groupby("step").size()
    assert len(tanh_per_step) == 3 and (tanh_per_step == TRIPS).all(), tanh_per_step
