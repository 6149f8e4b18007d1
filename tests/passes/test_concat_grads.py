"""concat-grads: the Slices of a concatenation's gradient get constant bounds."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from conftest import assert_close

import tf_stitch
from tf_stitch.graph import frontends
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext
from tf_stitch.passes.concat_grads import concat_grads


def _graph(fn, spec):  # type: ignore[no-untyped-def]
    f = tf.function(fn, input_signature=spec)
    return f, frontends.load(f.get_concrete_function()).graph


def _gate_grads(x: tf.Tensor, h: tf.Tensor) -> list[tf.Tensor]:
    """A GRU-style step: the gates see concat([x, h]); its gradient slices the pieces."""
    with tf.GradientTape() as tape:
        tape.watch([x, h])
        joined = tf.concat([tf.tanh(x), h * 2.0, tf.sigmoid(h)], axis=-1)
    # the incoming gradient, of the concatenation's batch (as a layer's above it would be)
    return tape.gradient(joined, [x, h], output_gradients=tf.square(joined) * 0.5)


SPEC = [tf.TensorSpec([None, 8]), tf.TensorSpec([None, 8])]


def test_the_slices_of_a_concat_gradient_get_constant_bounds() -> None:
    _, g = _graph(_gate_grads, SPEC)
    slices = [n for n in g if n.op == "Slice"]
    assert len(slices) == 3 and all(constant_value(g, n.inputs[1]) is None for n in slices)
    out = concat_grads.run(g, PassContext())
    got = {
        tuple(constant_value(out, out.node(n.name).inputs[1])): tuple(
            constant_value(out, out.node(n.name).inputs[2])
        )
        for n in slices
    }
    # piece k starts at 8k along the last axis; the batch is the gradient's, proven: -1
    assert got == {(0, 0): (-1, 8), (0, 8): (-1, 8), (0, 16): (-1, 8)}


def test_the_gradient_is_stitched_and_matches() -> None:
    f, _ = _graph(_gate_grads, SPEC)
    opt = tf_stitch.optimize(f)
    assert "Slice" not in {n.op for n in opt.graph_def.node}
    rng = np.random.default_rng(5)
    x, h = (tf.constant(rng.normal(size=(6, 8)), tf.float32) for _ in range(2))
    for want, got in zip(f(x, h), opt(x, h), strict=True):
        assert_close(want, got)


def test_a_slice_of_another_tensors_size_keeps_its_bounds() -> None:
    """A hand-built Slice(g, ConcatOffset(..), shape) where g's batch is not the piece's: the
    size stays computed, since -1 would take all of g's rows."""

    def sliced(g: tf.Tensor, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        offsets = tf.raw_ops.ConcatOffset(concat_dim=1, shape=[tf.shape(a), tf.shape(b)])
        return tf.slice(g, offsets[1], tf.shape(b))

    spec = [tf.TensorSpec([None, 6]), tf.TensorSpec([None, 2]), tf.TensorSpec([None, 4])]
    f, g = _graph(sliced, spec)
    out = concat_grads.run(g, PassContext())
    (node,) = [n for n in out if n.op == "Slice"]
    assert constant_value(out, node.inputs[2]) is None
    opt = tf_stitch.optimize(f)
    args = [tf.ones([5, 6]), tf.ones([3, 2]), tf.ones([3, 4])]
    assert_close(f(*args), opt(*args))
