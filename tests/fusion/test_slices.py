"""Slices inside stitched kernels: a window of a group input, read in place at an offset."""

from __future__ import annotations

import tensorflow as tf
from conftest import assert_close, random_inputs

import tf_stitch

S = tf.TensorSpec


def _check(fn, sig, kernels=1):  # type: ignore[no-untyped-def]
    f = tf.function(fn, input_signature=sig)
    opt = tf_stitch.optimize(f)
    assert sum(n.op == "StitchedKernel" for n in opt.graph_def.node) == kernels, tf_stitch.explain(
        opt
    )
    for batch in (1, 3):
        xs = random_inputs(sig, batch=batch, seed=batch)
        assert_close(f(*xs), opt(*xs))


def test_lstm_gates_read_the_matmul_outputs_at_offsets() -> None:
    def cell(x: tf.Tensor, h: tf.Tensor, c: tf.Tensor, w: tf.Tensor, u: tf.Tensor) -> tuple:
        z = tf.matmul(x, w) + tf.matmul(h, u) + tf.ones([32]) * 0.1
        i, f, g, o = tf.split(z, 4, axis=1)
        c2 = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
        return tf.sigmoid(o) * tf.tanh(c2), c2

    sig = [S([None, 8]), S([None, 8]), S([None, 8]), S([8, 32]), S([8, 32])]
    _check(cell, sig)


def test_windows_on_several_axes_and_a_reduction() -> None:
    def fn(x: tf.Tensor) -> tf.Tensor:
        a = tf.slice(x, [0, 1, 2], [-1, 3, 5])
        b = tf.slice(x, [0, 0, 0], [-1, 3, 5])
        return tf.nn.softmax(a * b)

    _check(fn, [S([None, 4, 7])])


def test_a_window_of_the_outer_axis_and_per_row_values() -> None:
    def fn(x: tf.Tensor, m: tf.Tensor) -> tf.Tensor:
        rows = x[2:6]  # a window of the outer axis
        scale = m[2:6]  # [4, 1]: one value per row
        return tf.exp(rows) * scale - tf.reduce_max(rows, -1, keepdims=True)

    _check(fn, [S([8, 16]), S([8, 1])])
