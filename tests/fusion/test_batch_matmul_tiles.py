"""BatchMatMulV2 by a matrix ([..., M, K] @ [K, N], Keras EinsumDense) inside kernels: a tile
whose rows are all the leading dims."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close

import tf_stitch
from tf_stitch.fusion.planner import plan_groups
from tf_stitch.graph.frontends import load

S = tf.TensorSpec
RNG = np.random.default_rng(0)
W = tf.constant(RNG.standard_normal([32, 48]).astype(np.float32) * 0.2)


def output_projection_and_layer_norm(x: tf.Tensor, residual: tf.Tensor) -> tf.Tensor:
    """An attention block's output projection, residual and layer norm."""
    y = tf.linalg.matmul(x, W) + 0.1 + residual
    m = tf.reduce_mean(y, -1, keepdims=True)
    return (y - m) * tf.math.rsqrt(tf.reduce_mean(tf.square(y - m), -1, keepdims=True) + 1e-5)


def _run(fn: Any, specs: list[S], shapes: list[list[list[int]]]) -> list[str]:
    f = tf.function(fn, input_signature=specs)
    opt = tf_stitch.optimize(f)
    for seed, call in enumerate(shapes):
        rng = np.random.default_rng(seed)
        args = [tf.constant(rng.standard_normal(s).astype(np.float32)) for s in call]
        assert_close(f(*args), opt(*args), rtol=2e-5, atol=2e-5)
    return [n.op for n in opt.graph_def.node]


def test_an_einsum_dense_projection_joins_the_layer_norm_after_it() -> None:
    specs = [S([None, 7, 32]), S([None, 7, 48])]
    ops = _run(
        output_projection_and_layer_norm,
        specs,
        [[[1, 7, 32], [1, 7, 48]], [[4, 7, 32], [4, 7, 48]]],
    )
    assert ops.count("StitchedKernel") == 1 and "BatchMatMulV2" not in ops
    graph = load(tf.function(output_projection_and_layer_norm).get_concrete_function(*specs)).graph
    (group,) = plan_groups(graph).groups
    (tile,) = group.layout.tiles.values()
    assert (tile.k, tile.n, tile.row_dims) == (32, 48, 2)
    assert group.layout.split == 2  # the units are (batch, position): the tile's rows


def test_rows_over_three_leading_dims_with_an_unknown_one() -> None:
    ops = _run(
        lambda x: tf.nn.gelu(tf.linalg.matmul(x, W)), [S([2, None, 5, 32])], [[[2, 3, 5, 32]]]
    )
    assert ops.count("StitchedKernel") == 1 and "BatchMatMulV2" not in ops


def test_a_projection_read_across_rows_stays_a_library_call() -> None:
    # a reduction over the positions: the units are not the tile's rows
    ops = _run(
        lambda x: tf.reduce_sum(tf.exp(tf.linalg.matmul(x, W)), 1),
        [S([3, 7, 32])],
        [[[3, 7, 32]]],
    )
    assert "BatchMatMulV2" in ops


@pytest.mark.parametrize(
    ("fn", "reason"),
    [
        (lambda x, y: tf.exp(tf.linalg.matmul(x, y)), "batched right operands"),
        (lambda x, y: tf.exp(tf.linalg.matmul(x, y, adjoint_b=True)), "adj_y"),
    ],
)
def test_batched_or_adjoint_operands_stay_library_calls(fn: Any, reason: str) -> None:
    text = tf_stitch.explain(tf.function(fn).get_concrete_function(S([2, 4, 8]), S([2, 8, 8])))
    assert reason in text
