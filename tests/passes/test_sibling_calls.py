"""sibling-calls: convolutions and matmuls of one input by slices tiling one filter become one
call whose output is sliced; slices that leave part of the filter out stay separate calls."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close
from graph_helpers import ops, run_pass

import tf_stitch
from tf_stitch.graph.frontends import load
from tf_stitch.passes.sibling_calls import sibling_calls
from tf_stitch.passes.split_slices import split_slices

S = tf.TensorSpec
RNG = np.random.default_rng(3)
FILTER = tf.constant(RNG.standard_normal([3, 3, 4, 32]).astype(np.float32))
MATRIX = tf.constant(RNG.standard_normal([12, 24]).astype(np.float32))
BIAS = tf.constant(RNG.standard_normal([32]).astype(np.float32))


def _conv_gates(x: tf.Tensor) -> tf.Tensor:
    """A ConvLSTM cell's input convolutions: one per gate, each by its quarter of the filter."""
    gates = [
        tf.nn.conv2d(x, w, 1, "SAME") + b
        for w, b in zip(tf.split(FILTER, 4, axis=3), tf.split(BIAS, 4), strict=True)
    ]
    i, f, c, o = gates
    return tf.sigmoid(f) * tf.tanh(c) + tf.sigmoid(i) * tf.sigmoid(o)


def _matmul_pieces(x: tf.Tensor) -> tf.Tensor:
    a, b, c = (tf.matmul(x, w) for w in tf.split(MATRIX, [4, 12, 8], axis=1))
    return tf.concat([tf.tanh(a), b * 2.0, tf.nn.relu(c)], axis=1)


def _three_of_four(x: tf.Tensor) -> tf.Tensor:
    i, f, c, _ = tf.split(FILTER, 4, axis=3)
    return sum(tf.nn.conv2d(x, w, 1, "SAME") for w in (i, f, c))


CASES: list[tuple[str, Callable[[tf.Tensor], tf.Tensor], S, dict[str, int]]] = [
    ("conv_gates", _conv_gates, S([None, 8, 8, 4]), {"Conv2D": 1}),
    ("matmul_pieces", _matmul_pieces, S([None, 12]), {"MatMul": 1}),
    ("three_of_four", _three_of_four, S([None, 8, 8, 4]), {"Conv2D": 3}),
]


@pytest.mark.parametrize(("name", "fn", "spec", "expect"), CASES, ids=[c[0] for c in CASES])
def test_calls_by_a_whole_filters_slices_become_one(
    name: str, fn: Callable[[tf.Tensor], tf.Tensor], spec: S, expect: dict[str, int]
) -> None:
    graph = run_pass(split_slices, load(tf.function(fn).get_concrete_function(spec)).graph)
    out = ops(run_pass(sibling_calls, graph))
    for op, count in expect.items():
        assert out[op] == count, (name, out)


@pytest.mark.parametrize(("name", "fn", "spec", "expect"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.usefixtures("kernel_cache")
def test_the_optimized_function_matches_tensorflow(
    name: str, fn: Callable[[tf.Tensor], tf.Tensor], spec: S, expect: dict[str, int]
) -> None:
    f = tf.function(fn, input_signature=[spec])
    x = tf.random.normal([2, *spec.shape[1:]], seed=7)
    optimized = tf_stitch.optimize(f)
    assert_close(f(x), optimized(x), rtol=1e-5, atol=1e-5)
    calls = sum(n.op in ("Conv2D", "MatMul") for n in optimized.graph)
    assert calls <= expect.get("Conv2D", expect.get("MatMul")), name
