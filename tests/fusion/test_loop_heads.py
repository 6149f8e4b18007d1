"""loop-heads: a kernel that would produce the inputs of two loops is left to TensorFlow (its
executor starts each loop on the thread of the op that fed it); one loop is fine."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from conftest import assert_close

import tf_stitch
from tf_stitch.fusion.planner import plan_groups
from tf_stitch.graph.frontends import load

SPEC = tf.TensorSpec([None, 6, 4])


def _scan(x: tf.Tensor) -> tf.Tensor:
    """A loop over the time axis of a [time, batch, features] tensor (a recurrent layer)."""

    def body(t: tf.Tensor, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return t + 1, tf.tanh(h + x[t])

    return tf.while_loop(lambda t, h: t < tf.shape(x)[0], body, (0, tf.zeros_like(x[0])))[1]


def _bidirectional(x: tf.Tensor) -> tf.Tensor:
    h = tf.tanh(x * 2.0 + 1.0)
    forward = _scan(tf.transpose(h, [1, 0, 2]))
    backward = _scan(tf.reverse(tf.transpose(h, [1, 0, 2]), [0]))
    return forward + backward


def _forward_only(x: tf.Tensor) -> tf.Tensor:
    return _scan(tf.transpose(tf.tanh(x * 2.0 + 1.0), [1, 0, 2]))


def _plan(fn):  # type: ignore[no-untyped-def]
    return plan_groups(load(tf.function(fn).get_concrete_function(SPEC)).graph)


def test_a_group_feeding_two_loops_is_left_to_tensorflow() -> None:
    plan = _plan(_bidirectional)
    assert plan.groups == []
    assert any("start 2 loops" in str(r) for r in plan.records)


def test_a_group_feeding_one_loop_is_stitched() -> None:
    plan = _plan(_forward_only)
    assert len(plan.groups) == 1
    assert not any("loops (" in str(r) for r in plan.records)


def test_values_are_the_same_either_way() -> None:
    x = tf.constant(np.random.default_rng(0).standard_normal([3, 6, 4]), tf.float32)
    for fn in (_bidirectional, _forward_only):
        f = tf.function(fn, input_signature=[SPEC])
        assert_close(tf_stitch.optimize(f)(x), f(x))
