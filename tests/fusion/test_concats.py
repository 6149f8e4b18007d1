"""ConcatV2 written by a kernel: equal parts side by side along the last axis or an inner one."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
from conftest import assert_close

import tf_stitch
from tf_stitch.fusion.planner import plan_groups
from tf_stitch.graph.frontends import load

S = tf.TensorSpec
RNG = np.random.default_rng(0)
ITEMS = tf.constant(RNG.normal(size=(50, 8)).astype("float32"))
CATS = tf.constant(RNG.normal(size=(10, 8)).astype("float32"))


def _optimize(fn: Any, specs: list[tf.TensorSpec]) -> tuple[Any, Any, list[str]]:
    f = tf.function(fn, input_signature=specs)
    opt = tf_stitch.optimize(f)
    return f, opt, [n.op for n in opt.graph_def.node]


def test_embeddings_of_two_tables_concatenated_are_one_kernel() -> None:
    def fn(items: tf.Tensor, cats: tf.Tensor) -> tf.Tensor:  # DIEN's behaviour features
        return tf.concat([tf.gather(ITEMS, items), tf.gather(CATS, cats)], axis=-1)

    specs = [S([None, 5], tf.int32), S([None, 5], tf.int32)]
    f, opt, ops = _optimize(fn, specs)
    assert ops.count("StitchedKernel") == 1 and not {"ConcatV2", "GatherV2"} & set(ops)
    for batch in (1, 4):
        args = (
            tf.constant(RNG.integers(0, 50, (batch, 5)), tf.int32),
            tf.constant(RNG.integers(0, 10, (batch, 5)), tf.int32),
        )
        assert_close(f(*args), opt(*args))


def test_parts_of_several_axes_are_written_at_their_offsets() -> None:
    def fn(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        y = tf.concat([tf.tanh(x), x * 2.0, tf.sigmoid(x)], axis=-1)
        return y, tf.exp(x)

    for shape in ([None, 8], [None, 3, 8], [None, 40, 64]):
        specs = [S(shape)]
        f, opt, ops = _optimize(fn, specs)
        assert "ConcatV2" not in ops
        for batch in (1, 4):
            x = tf.random.normal([batch, *shape[1:]], seed=batch)
            assert_close(f(x), opt(x))


def _records(fn: Any, *specs: tf.TensorSpec) -> list[str]:
    plan = plan_groups(load(tf.function(fn).get_concrete_function(*specs)).graph)
    return [str(r) for r in plan.records]


def test_unequal_parts_other_axes_and_concats_read_in_their_kernel_are_refused() -> None:
    records = _records(lambda x, y: tf.concat([tf.exp(x), tf.exp(y)], -1), S([4, 8]), S([4, 3]))
    assert any("ConcatV2 of parts of different shapes" in r for r in records)
    records = _records(lambda x: tf.concat([tf.exp(x), tf.tanh(x)], 0), S([None, 8]))
    assert any("ConcatV2 of parts of unknown size from its axis on" in r for r in records)

    def read_back(x: tf.Tensor) -> tf.Tensor:
        return tf.exp(tf.concat([tf.tanh(x), tf.sigmoid(x)], -1)) * 2.0

    # the exp reads the concatenation: it runs in a kernel of its own
    assert any(r.startswith("merge concat -> Exp: forbid(") for r in _records(read_back, S([4, 8])))
    f, opt, _ = _optimize(read_back, [S([None, 8])])
    x = tf.random.normal([3, 8], seed=1)
    assert_close(f(x), opt(x))


def test_a_matmul_reading_through_a_concatenation_another_kernel_writes() -> None:
    w = tf.constant(RNG.normal(size=(16, 12)).astype("float32"))

    def fn(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        c = tf.concat([tf.tanh(x), tf.sigmoid(x)], -1)  # written by the first kernel
        return c, tf.nn.relu(tf.matmul(c, w) + 1.0) * 2.0  # the tile reads the parts in place

    f, opt, ops = _optimize(fn, [S([None, 8])])
    assert ops.count("StitchedKernel") == 2 and not {"ConcatV2", "MatMul"} & set(ops)
    for batch in (1, 7):
        x = tf.random.normal([batch, 8], seed=batch)
        assert_close(f(x), opt(x))


def test_embeddings_stacked_along_an_inner_axis_are_one_kernel() -> None:
    """Keras' Concatenate(axis=1) of [batch, 1, d] embeddings (a DLRM's feature stack): part
    k of each row lies k * d further in the stack."""

    def fn(items: tf.Tensor, cats: tf.Tensor, dense: tf.Tensor) -> tf.Tensor:
        parts = [tf.gather(ITEMS, items[:, i : i + 1]) for i in range(2)]
        parts += [tf.gather(CATS, cats), dense[:, None, :] * 2.0]
        return tf.concat(parts, axis=1)

    specs = [S([None, 2], tf.int32), S([None, 1], tf.int32), S([None, 8])]
    f, opt, ops = _optimize(fn, specs)
    assert ops.count("StitchedKernel") == 1 and not {"ConcatV2", "GatherV2"} & set(ops), ops
    for batch in (1, 5):
        args = (
            tf.constant(RNG.integers(0, 50, (batch, 2)), tf.int32),
            tf.constant(RNG.integers(0, 10, (batch, 1)), tf.int32),
            tf.constant(RNG.normal(size=(batch, 8)).astype("float32")),
        )
        assert_close(f(*args), opt(*args))


def test_a_concatenation_along_the_first_axis_of_known_sizes_is_written_by_the_kernel() -> None:
    def fn(a: tf.Tensor) -> tf.Tensor:
        return tf.concat([tf.exp(a), tf.tanh(a) * 3.0], axis=0)

    f, opt, ops = _optimize(fn, [S([6, 5, 7])])
    assert ops.count("StitchedKernel") == 1 and "ConcatV2" not in ops
    x = tf.random.normal([6, 5, 7], seed=3)
    assert_close(f(x), opt(x))


def test_parts_of_unknown_size_after_the_axis_stay_a_tensorflow_concat() -> None:
    def fn(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.concat([tf.exp(a), tf.tanh(b)], axis=1)

    _, _, ops = _optimize(fn, [S([4, 3, None]), S([4, 3, None])])
    assert "ConcatV2" in ops
