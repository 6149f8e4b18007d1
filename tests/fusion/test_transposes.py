"""Transposes inside kernels: of a group input, read in place with permuted strides; of a value
the kernel computes, written out with permuted strides."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close
from layout_helpers import forbid_reason, layout_of

import tf_stitch
from tf_stitch.graph.ir import TensorRef

S = tf.TensorSpec


def _check(fn: Callable[..., tf.Tensor], specs: list[S], kernels: int = 1) -> None:
    f = tf.function(fn, input_signature=specs)
    opt = tf_stitch.optimize(f)
    ops = [n.op for n in opt.graph_def.node]
    assert "Transpose" not in ops, ops
    assert ops.count("StitchedKernel") == kernels
    for batch, seed in ((1, 0), (3, 1)):
        rng = np.random.default_rng(seed)
        shapes = [[d if d is not None else batch for d in s.shape] for s in specs]
        args = [tf.constant(rng.standard_normal(s).astype(np.float32)) for s in shapes]
        assert_close(f(*args), opt(*args), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize(
    ("fn", "specs"),
    [
        (lambda x, y: tf.exp(tf.transpose(x)) * y, [S([5, 7]), S([7, 5])]),
        (lambda x: tf.nn.softmax(tf.transpose(x, [0, 2, 1]) * 2.0), [S([None, 6, 9])]),
        (lambda x: tf.reduce_sum(tf.transpose(x) * 2.0, 0), [S([5, 40])]),  # a column kernel
        (lambda x: tf.exp(tf.transpose(x, [2, 0, 1])) + 1.0, [S([None, 4, 3])]),
    ],
)
def test_a_transposed_input_is_read_in_place(fn: Callable, specs: list[S]) -> None:
    _check(fn, specs)


@pytest.mark.parametrize(
    ("fn", "specs"),
    [
        (lambda x: tf.transpose(tf.tanh(x) * 3.0, [1, 0, 2]), [S([4, None, 8])]),
        (lambda x: tf.transpose(x - tf.reduce_max(x, -1, keepdims=True)), [S([5, 7])]),
    ],
)
def test_a_transpose_of_a_computed_value_is_written_with_permuted_strides(
    fn: Callable, specs: list[S]
) -> None:
    _check(fn, specs)


def test_the_input_of_a_transposed_read_sits_on_the_permuted_axes() -> None:
    _, layout = layout_of(
        lambda x, y: tf.exp(tf.transpose(x, [1, 2, 0])) * y, S([2, 3, 4]), S([3, 4, 2])
    )
    assert layout.domain == (3, 4, 2)
    (source,) = layout.slices.values()
    assert source.tensor == TensorRef("x", 0)
    assert (source.dims, source.axes) == ((2, 3, 4), (2, 0, 1))


def test_a_square_transpose_is_not_mistaken_for_the_untransposed_value() -> None:
    # [6,6]: the shapes agree, so only the placement tells a transpose from its input (exp(-x),
    # not exp(x) again: common-subexpressions would make the two exps one)
    _check(lambda x: tf.transpose(tf.exp(x)) + tf.exp(-x), [S([6, 6])], kernels=2)


def test_a_transpose_of_a_computed_value_is_not_read_again_in_its_kernel() -> None:
    reason = forbid_reason(lambda x: tf.exp(tf.transpose(tf.tanh(x))), S([4, 4]))
    assert "reads a transpose of a value its kernel computes" in reason


def test_a_transposed_input_also_fetched_is_written_by_the_same_kernel() -> None:
    _check(lambda x: (tf.transpose(x), tf.exp(tf.transpose(x)) * 2.0), [S([4, 8])])
