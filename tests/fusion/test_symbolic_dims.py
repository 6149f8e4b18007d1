"""Symbolic dims: unknown sizes are one symbol only where the graph proves them equal."""

from __future__ import annotations

import tensorflow as tf
from graph_helpers import graph_of, spec

from tf_stitch.fusion.symbolic_dims import SymbolicDims
from tf_stitch.graph.ir import Graph, TensorRef


def _node(graph: Graph, op: str, nth: int = 0) -> TensorRef:
    return [n for n in graph if n.op == op][nth].output(0)


def _arg(graph: Graph, i: int) -> TensorRef:
    return graph.inputs[i]


def test_unrelated_inputs_have_their_own_symbols() -> None:
    g = graph_of(lambda a, b: (a * 2.0, b * 3.0), spec(None), spec(None))
    dims = SymbolicDims(g)
    assert dims.symbol(_arg(g, 0), 0) != dims.symbol(_arg(g, 1), 0)
    assert dims.symbol(_node(g, "Mul", 0), 0) == dims.symbol(_arg(g, 0), 0)
    assert dims.symbol(_node(g, "Mul", 1), 0) == dims.symbol(_arg(g, 1), 0)


def test_an_elementwise_op_relates_its_operands() -> None:
    g = graph_of(lambda a, b, c: (a + b, c), spec(None, 4), spec(None, 4), spec(None, 4))
    dims = SymbolicDims(g)
    a, b, c = (dims.symbol(_arg(g, i), 0) for i in range(3))
    assert a == b != c
    assert dims.symbol(_arg(g, 0), 1) is None  # a known size has no symbol


def test_reductions_transposes_and_matmuls_keep_their_axes() -> None:
    def f(x: tf.Tensor, w: tf.Tensor) -> tuple[tf.Tensor, ...]:
        r = tf.reduce_sum(x, 1)
        t = tf.transpose(x, [1, 0])
        m = tf.matmul(x, w)
        return r, t, m

    g = graph_of(f, spec(None, None), spec(None, 3))
    dims = SymbolicDims(g)
    rows, cols = dims.symbol(_arg(g, 0), 0), dims.symbol(_arg(g, 0), 1)
    assert dims.symbol(_node(g, "Sum"), 0) == rows
    assert dims.symbols(_node(g, "Transpose")) == (cols, rows)
    assert dims.symbol(_node(g, "MatMul"), 0) == rows
    assert dims.symbol(_arg(g, 1), 0) == cols  # contracted with x's columns


def test_reshapes_keep_only_what_they_prove() -> None:
    def f(x: tf.Tensor) -> tuple[tf.Tensor, ...]:
        kept = tf.reshape(x, [-1, 2, 3])  # [?, 6] -> [?, 2, 3]: the same rows
        halved = tf.reshape(x, [-1, 3])  # [?, 6] -> [?, 3]: twice as many rows
        return kept, halved, tf.expand_dims(x, 1)

    g = graph_of(f, spec(None, 6))
    dims = SymbolicDims(g)
    rows = dims.symbol(_arg(g, 0), 0)
    reshapes = [n.output(0) for n in g if n.op == "Reshape"]
    assert [dims.symbol(r, 0) == rows for r in reshapes] == [True, False]
    assert dims.symbol(_node(g, "ExpandDims"), 0) == rows


def test_a_reshape_to_sizes_read_off_a_shape() -> None:
    def f(x: tf.Tensor) -> tf.Tensor:
        s = tf.shape(x)
        return tf.reshape(x, tf.stack([s[0], s[1], 2, 2]))

    g = graph_of(f, spec(None, None, 4))
    dims = SymbolicDims(g)
    reshape = _node(g, "Reshape")
    assert dims.symbols(reshape)[:2] == dims.symbols(_arg(g, 0))[:2]


def test_dynamic_partition_outputs_are_new_sizes() -> None:
    def f(x: tf.Tensor, p: tf.Tensor) -> list[tf.Tensor]:
        return tf.dynamic_partition(x, p, 2)

    g = graph_of(f, spec(None, 4), spec(None, dtype=tf.int32))
    dims = SymbolicDims(g)
    node = next(n for n in g if n.op == "DynamicPartition")
    s0, s1 = dims.symbol(node.output(0), 0), dims.symbol(node.output(1), 0)
    assert s0 != s1 and dims.symbol(_arg(g, 0), 0) not in (s0, s1)


def test_whole_axes_of_splits_and_slices() -> None:
    g = graph_of(lambda x: tf.split(x, [2, 4], 1), spec(None, 6))
    dims = SymbolicDims(g)
    rows = dims.symbol(_arg(g, 0), 0)
    split = next(n for n in g if n.op in ("Split", "SplitV"))
    assert dims.symbol(split.output(0), 0) == dims.symbol(split.output(1), 0) == rows


def test_proven_sizes_are_never_joined_by_a_broadcast() -> None:
    def f(a: tf.Tensor, b: tf.Tensor, x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, ...]:
        return a * b, tf.tanh(a) * a + a, tf.matmul(x, y)

    g = graph_of(f, spec(None, 4), spec(None, 4), spec(None, 2, 3), spec(None, 3, 5))
    dims = SymbolicDims(g, proven=True)
    a, b = dims.symbol(_arg(g, 0), 0), dims.symbol(_arg(g, 1), 0)
    assert a != b  # either may be 1
    assert dims.symbol(_node(g, "Mul", 0), 0) not in (a, b)
    assert dims.symbol(_node(g, "AddV2"), 0) == a  # every operand's size is a's
    x, y = dims.symbol(_arg(g, 2), 0), dims.symbol(_arg(g, 3), 0)
    assert x != y  # batch axes of a matmul broadcast too
    assert SymbolicDims(g).symbol(_arg(g, 2), 0) == SymbolicDims(g).symbol(_arg(g, 3), 0)


def test_proven_sizes_join_through_later_proofs() -> None:
    def f(a: tf.Tensor, b: tf.Tensor) -> tuple[tf.Tensor, ...]:
        s = a * b  # decided only once a and b are proven one size, by the concatenation
        return s, tf.concat([a, b], axis=1)

    g = graph_of(f, spec(None, 4), spec(None, 4))
    dims = SymbolicDims(g, proven=True)
    assert dims.symbol(_arg(g, 0), 0) == dims.symbol(_arg(g, 1), 0)
    assert dims.symbol(_node(g, "Mul"), 0) == dims.symbol(_arg(g, 0), 0)
