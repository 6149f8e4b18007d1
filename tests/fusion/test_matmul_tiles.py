"""Small matmuls inside kernels: tiles of a block's rows, left operands read in place."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close, random_inputs

import tf_stitch
from tf_stitch.codegen.cpu import emit_cpu
from tf_stitch.codegen.lower import lower
from tf_stitch.fusion.legality import SMALL_MATMUL_BYTES
from tf_stitch.fusion.operand_segments import Segment
from tf_stitch.fusion.planner import PlannerOptions, plan_groups
from tf_stitch.graph.frontends import load
from tf_stitch.graph.ir import TensorRef
from tf_stitch.optimize import optimize_graph

S = tf.TensorSpec


def _plan(fn: Any, *specs: tf.TensorSpec, budget: int | None = None) -> Any:
    return plan_groups(_graph(fn, *specs), PlannerOptions(on_chip_budget=budget or 20 * 1024))


def _graph(fn: Any, *specs: tf.TensorSpec) -> Any:
    return load(tf.function(fn).get_concrete_function(*specs)).graph


def _optimized_ops(fn: Any, *specs: tf.TensorSpec) -> tuple[Any, list[str]]:
    f = tf.function(fn, input_signature=list(specs))
    opt = tf_stitch.optimize(f)
    return opt, [n.op for n in opt.graph_def.node]


def _check(fn: Any, opt: Any, specs: list[tf.TensorSpec]) -> None:
    for batch, seed in ((1, 0), (5, 1), (13, 2)):
        xs = random_inputs(specs, batch=batch, seed=seed)
        assert_close(fn(*xs), opt(*xs))


def _gru_cell(h: tf.Tensor, x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    """TF1's GRU cell: the gates from concat([x, h]) @ W."""
    zr = tf.sigmoid(tf.matmul(tf.concat([x, h], axis=1), w))
    z, r = tf.split(zr, 2, axis=1)
    return z * h + (1.0 - z) * tf.tanh(r * h)


def test_a_matmul_joins_the_kernel_of_its_consumers() -> None:
    graph = _graph(lambda x, w: tf.nn.relu(tf.matmul(x, w) + 1.0) * 2.0, S([None, 8]), S([8, 24]))
    (group,) = plan_groups(graph).groups
    assert "MatMul" in {n.op for n in group.nodes}
    (tile,) = group.layout.tiles.values()
    assert (tile.k, tile.n) == (8, 24)
    assert group.layout.split == 1  # a block's rows are the matmul's rows
    source = emit_cpu(lower(graph, group, "k"))
    assert "ts_matmul(" in source and "ts_b0" in source


def test_concatenated_and_sliced_operands_are_read_in_place() -> None:
    specs = [S([None, 16]), S([None, 6, 8]), S([24, 32])]

    def fn(h: tf.Tensor, seq: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
        return _gru_cell(h, seq[:, 4], w)

    opt, ops = _optimized_ops(fn, *specs)
    assert ops.count("StitchedKernel") == 1
    assert not {"ConcatV2", "StridedSlice", "Slice", "MatMul"} & set(ops)
    _check(fn, opt, specs)


def test_segments_of_a_concat_of_a_slice_and_a_tensor() -> None:
    specs = [S([None, 16]), S([None, 6, 8]), S([24, 32])]
    f = tf.function(lambda h, seq, w: _gru_cell(h, seq[:, 4], w), input_signature=specs)
    _, ctx = optimize_graph(load(f.get_concrete_function()).graph, None)
    (group,) = ctx.plan.groups
    (tile,) = group.layout.tiles.values()
    seq, h = TensorRef("seq"), TensorRef("h")
    # seq[:, 4] is 8 floats at offset 4 * 8 of each 48-float row; h is whole rows of 16
    assert tile.segments == (Segment(seq, 32, 48, 8), Segment(h, 0, 16, 16))


@pytest.mark.parametrize("columns", [1, 3, 16, 40, 64, 130])
def test_tiles_of_any_width_compute_the_product(columns: int) -> None:
    specs = [S([None, 37]), S([37, columns])]

    def fn(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
        return tf.tanh(tf.matmul(x, w) * 0.5 + 1.0)

    opt, ops = _optimized_ops(fn, *specs)
    assert ops.count("StitchedKernel") == 1 and "MatMul" not in ops
    _check(fn, opt, specs)


def test_a_matmul_read_outside_is_written_by_its_kernel_too() -> None:
    specs = [S([None, 12]), S([12, 20])]

    def fn(x: tf.Tensor, w: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        m = tf.matmul(x, w)
        return m, tf.sigmoid(m) - 0.5

    opt, ops = _optimized_ops(fn, *specs)
    assert ops.count("StitchedKernel") == 1 and "MatMul" not in ops
    _check(fn, opt, specs)


def test_nan_and_inf_reach_the_outputs() -> None:
    specs = [S([None, 16]), S([16, 20])]
    f = tf.function(lambda x, w: tf.exp(tf.matmul(x, w)) - 1.0, input_signature=specs)
    opt = tf_stitch.optimize(f)
    x = np.ones((6, 16), np.float32)
    x[1, 3], x[4, 0] = np.nan, np.inf
    w = np.full((16, 20), 0.25, np.float32)
    assert_close(f(x, w), opt(x, w))


def test_large_matmuls_stay_library_calls() -> None:
    k = 512
    n = SMALL_MATMUL_BYTES // (4 * k) + 1
    plan = _plan(lambda x, w: tf.nn.relu(tf.matmul(x, w) + 1.0) * 2.0, S([None, k]), S([k, n]))
    assert not any("MatMul" in {n.op for n in g.nodes} for g in plan.groups)
    assert any("large MatMul" in str(r) and "stays a library call" in str(r) for r in plan.records)


def test_transposed_operands_stay_library_calls() -> None:
    plan = _plan(
        lambda x, w: tf.nn.relu(tf.matmul(x, w, transpose_b=True) + 1.0) * 2.0,
        S([None, 8]),
        S([8, 8]),
    )
    assert any("MatMul with transpose_b" in str(r) for r in plan.records)


def test_an_operand_computed_in_the_group_splits_the_kernel() -> None:
    plan = _plan(lambda x, w: tf.exp(tf.matmul(tf.tanh(x) * 2.0, w)) + 1.0, S([None, 8]), S([8, 8]))
    assert len(plan.groups) == 2
    assert any("is computed in the group" in str(r) for r in plan.records)


def test_a_one_row_matmul_is_not_broadcast_over_the_rows() -> None:
    def fn(x: tf.Tensor, y: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
        return tf.exp(tf.matmul(x, w)) + y * 2.0

    plan = _plan(fn, S([1, 8]), S([5, 8]), S([8, 8]))
    assert not any("MatMul" in {n.op for n in g.nodes} for g in plan.groups)
    assert any("one-row matmul broadcast over rows" in str(r) for r in plan.records)


def test_block_rows_fit_the_on_chip_budget() -> None:
    def fn(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
        return tf.nn.relu(tf.matmul(x, w) + 1.0) * 2.0

    for budget, rows in ((20 * 1024, 2), (64 * 1024, 6), (1024, 1)):
        (group,) = _plan(fn, S([None, 16]), S([16, 2048]), budget=budget).groups
        assert group.memory.block_rows == rows
        assert group.memory.tile_bytes == rows * 2048 * 4
        assert f"matmul tiles of {rows} rows" in str(group.memory)


def test_a_reshape_that_merges_rows_is_read_as_its_own_rows() -> None:
    specs = [S([None, 6, 8]), S([8, 20])]

    def fn(seq: tf.Tensor, w: tf.Tensor) -> tf.Tensor:  # Keras' Dense on a sequence
        return tf.sigmoid(tf.matmul(tf.reshape(tf.tanh(seq) * 2.0, [-1, 8]), w)) * 2.0

    opt, ops = _optimized_ops(fn, *specs)
    _check(fn, opt, specs)
    assert "MatMul" not in ops  # a tile of the rows of the reshaped tensor


def test_views_keep_rows_only_when_provable() -> None:
    from tf_stitch.fusion.operand_segments import keeps_rows

    def fn(x: tf.Tensor, y: tf.Tensor) -> Any:
        return (
            tf.squeeze(x, axis=[1]),
            tf.squeeze(y, axis=[0]),
            tf.expand_dims(x, 2),
            tf.reshape(x, [-1, 8]),
            tf.reshape(y, [8, 1]),
        )

    graph = _graph(fn, S([None, 1, 8]), S([1, 8]))
    verdicts = {n.op + str(n.outputs[0].shape): keeps_rows(graph, n) for n in graph}
    assert verdicts["Squeeze(None, 8)"] and not verdicts["Squeeze(8,)"]
    assert verdicts["ExpandDims(None, 1, 1, 8)"]
    assert not verdicts["Reshape(None, 8)"]  # unknown rows: not provable
    assert not verdicts["Reshape(8, 1)"]


@pytest.mark.parametrize(("k", "n"), [(0, 8), (8, 0), (5, 3)])
def test_empty_and_tiny_products(k: int, n: int) -> None:
    w = tf.constant(np.ones((k, n), np.float32))
    specs = [S([None, k])]

    def fn(x: tf.Tensor) -> tf.Tensor:
        return tf.tanh(tf.matmul(x, w) + 1.0) * 2.0

    f = tf.function(fn, input_signature=specs)
    opt = tf_stitch.optimize(f)
    for batch in (0, 3):
        x = tf.ones([batch, k])
        assert_close(f(x), opt(x))
