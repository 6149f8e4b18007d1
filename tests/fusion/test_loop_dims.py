"""Loop dims: a loop body's arguments share the classes of unknown sizes they keep on every
trip, so that the backward loop of a gradient sums over constant axes (its
`BroadcastGradientArgs` read shapes the forward loop pushed); a state a trip may broadcast to
another batch keeps no class, and its gradient keeps TensorFlow's run-time axes."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close

import tf_stitch
from tf_stitch.fusion.loop_dims import loop_seeds
from tf_stitch.graph.frontends import load
from tf_stitch.graph.ir import Graph

S = tf.TensorSpec
STEPS = 5
RNG = np.random.default_rng(3)
W = tf.constant(RNG.normal(size=(8, 8)).astype("float32") * 0.4)


def _recurrence(x: tf.Tensor, mix: tf.Tensor | None) -> tf.Tensor:
    """h <- sigmoid(x_t W) * h + tanh(x_t W) (* mix), h starting at zeros of x's batch."""
    steps = tf.TensorArray(tf.float32, size=STEPS).unstack(tf.transpose(x, [1, 0, 2]))

    def body(t: tf.Tensor, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        a = tf.matmul(steps.read(t), W)
        h = tf.sigmoid(a) * h + tf.tanh(a)
        return t + 1, h if mix is None else h * mix

    h0 = tf.zeros([tf.shape(x)[0], 8])
    return tf.while_loop(lambda t, h: t < STEPS, body, (tf.constant(0), h0))[1]


def _own_batch(x: tf.Tensor) -> list[tf.Tensor]:
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(tf.square(_recurrence(x, None)))
    return [loss, tape.gradient(loss, x)]


def _mixed(x: tf.Tensor, mix: tf.Tensor) -> list[tf.Tensor]:
    """`h * mix`, mix's batch unrelated to x's: a batch of 1 broadcasts the state to mix's."""
    with tf.GradientTape() as tape:
        tape.watch([x, mix])
        loss = tf.reduce_sum(tf.square(_recurrence(x, mix)))
    return [loss, *tape.gradient(loss, [x, mix])]


X = S([None, STEPS, 8])
M = S([None, 8])


def _graph(fn: Callable[..., list[tf.Tensor]], *specs: S) -> Graph:
    return load(tf.function(fn).get_concrete_function(*specs)).graph


def _state_marks(graph: Graph) -> list[int]:
    """The class of the batch axis of the forward loop's arguments shaped [batch, 8] (-1:
    none)."""
    (forward,) = [n for n in graph if n.op in ("While", "StatelessWhile") and "grad" not in n.name]
    _, seeds = loop_seeds(graph)[forward.name]
    state = [i for i, r in enumerate(forward.inputs) if graph.info(r).shape == (None, 8)]
    return [seeds.dims[i][0] for i in state]


def _normal(*shape: int, seed: int) -> tf.Tensor:
    """The same inputs whatever ran before (tf.random.normal's op seeds are not: they follow
    the ops the process made)."""
    return tf.constant(np.random.default_rng(seed).standard_normal(shape).astype("float32"))


def _assert_close_to_scale(want: tf.Tensor, got: tf.Tensor) -> None:
    """Within float32 rounding of the largest value: the gradients run to a few hundred, and
    the sums over the batch and the trips, in another order, leave errors of that scale's
    ulps on the small elements beside them."""
    scale = max(1.0, float(np.max(np.abs(want.numpy()))))
    assert_close(want, got, atol=1e-5 * scale)


def _backward_ops(optimized: tf_stitch.OptimizedFunction) -> list[str]:
    return [
        n.op
        for f in optimized.graph_def.library.function
        if "body" in f.signature.name and "grad" in f.signature.name
        for n in f.node_def
    ]


def test_a_state_of_the_inputs_batch_is_marked_and_its_gradient_sums_over_constant_axes() -> None:
    marks = _state_marks(_graph(_own_batch, X))
    assert marks and all(k >= 0 for k in marks)
    original = tf.function(_own_batch, input_signature=[X])
    optimized = tf_stitch.optimize(original)
    ops = _backward_ops(optimized)
    assert "StitchedKernel" in ops and "BroadcastGradientArgs" not in ops, ops
    for batch in (1, 3):
        x = _normal(batch, STEPS, 8, seed=batch)
        for want, got in zip(original(x), optimized(x), strict=True):
            _assert_close_to_scale(want, got)


# (Batches that differ are refused by the forward loop's kernel, whose `h * mix` assumes them
# equal and checks it at run time: fusion/symbolic_dims.py.)
@pytest.mark.parametrize(("x_batch", "mix_batch"), [(1, 1), (2, 2)])
def test_a_state_a_trip_may_broadcast_keeps_tensorflows_run_time_axes(
    x_batch: int, mix_batch: int
) -> None:
    # the state unmarked; mix, which every trip passes on unchanged, keeps its class
    state, passed_on = sorted(_state_marks(_graph(_mixed, X, M)))
    assert state == -1 and passed_on >= 0
    original = tf.function(_mixed, input_signature=[X, M])
    optimized = tf_stitch.optimize(original)
    assert "BroadcastGradientArgs" in _backward_ops(optimized)
    x = _normal(x_batch, STEPS, 8, seed=1)
    mix = _normal(mix_batch, 8, seed=2)
    for want, got in zip(original(x, mix), optimized(x, mix), strict=True):
        _assert_close_to_scale(want, got)


def test_a_graph_without_loops_has_no_marks() -> None:
    assert loop_seeds(_graph(lambda x: [tf.tanh(x)], M)) == {}


def test_only_lists_that_start_empty_are_described_by_what_the_loop_pushes() -> None:
    """A list that held values before the loop returns them too: nothing is said of it."""
    from tf_stitch.fusion.loop_dims import _starts_empty

    def lists(x: tf.Tensor) -> list[tf.Tensor]:
        empty = tf.raw_ops.EmptyTensorList(
            element_shape=tf.constant([-1, 8]), max_num_elements=-1, element_dtype=tf.float32
        )
        full = tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=tf.constant([-1, 8]))
        return [tf.identity(empty), full]

    g = _graph(lists, S([4, None, 8]))
    empty, full = g.outputs  # (through Identity nodes)
    assert _starts_empty(g, empty) and not _starts_empty(g, full)
