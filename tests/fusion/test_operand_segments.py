"""OperandReader.segments: a matmul tile's left operand as column segments (tensor, offset of
row 0, row stride, width) of tensors outside the group, read through concatenations along
columns, views that keep the rows and Slices that keep every row; the operands it reads whole
and the ones it refuses (`NotInPlace`). Also keeps_rows, static_product and same_dims."""

from __future__ import annotations

from typing import Any

import pytest
import tensorflow as tf
from graph_helpers import graph_of, ref, spec, v1_graph

from tf_stitch.fusion.operand_segments import (
    NotInPlace,
    OperandReader,
    Segment,
    keeps_rows,
    same_dims,
    static_product,
)
from tf_stitch.graph.ir import Graph


def segments(graph: Graph, name: str, rows: int | None = None, members: Any = ()) -> list[Segment]:
    return OperandReader(graph, set(members), graph.fed()).segments(ref(name), rows)


def test_a_whole_tensor_is_one_segment_of_its_rows() -> None:
    graph = graph_of(lambda x, seq: (x, seq), spec(None, 16), spec(4, 6, 8))
    assert segments(graph, "x") == [Segment(ref("x"), 0, 16, 16)]
    assert segments(graph, "seq", 4) == [Segment(ref("seq"), 0, 48, 48)]


def test_a_concat_along_columns_is_its_parts_in_order() -> None:
    def fn(x: tf.Tensor, h: tf.Tensor) -> Any:
        return tf.concat([tf.concat([x, h], axis=1), x], axis=-1)

    graph = graph_of(fn, spec(None, 8), spec(None, 16))
    x, h = Segment(ref("x"), 0, 8, 8), Segment(ref("h"), 0, 16, 16)
    assert segments(graph, "concat_1") == [x, h, x]


def test_a_concat_along_rows_or_of_rank_three_is_read_whole() -> None:
    def fn(h: tf.Tensor, seq: tf.Tensor) -> Any:
        return tf.concat([h, h], axis=0), tf.concat([seq, seq], axis=1)

    graph = graph_of(fn, spec(None, 16), spec(None, 6, 8))
    assert segments(graph, "concat") == [Segment(ref("concat"), 0, 16, 16)]
    assert segments(graph, "concat_1") == [Segment(ref("concat_1"), 0, 96, 96)]


@pytest.mark.parametrize(
    ("begin", "size", "offset", "width"),
    [
        ([0, 4, 0], [-1, 1, 8], 32, 8),  # seq[:, 4]
        ([0, 2, 0], [-1, 2, 8], 16, 16),  # seq[:, 2:4]
        ([0, 1, 3], [-1, 1, 4], 11, 4),  # seq[:, 1, 3:7]
        ([0, 5, 7], [-1, 1, 1], 47, 1),  # the last element of each row
    ],
)
def test_a_slice_keeping_every_row_is_one_run_of_each_row(
    begin: list[int], size: list[int], offset: int, width: int
) -> None:
    graph = graph_of(lambda seq: tf.slice(seq, begin, size), spec(None, 6, 8))
    assert segments(graph, "Slice") == [Segment(ref("seq"), offset, 48, width)]


def test_slices_that_are_not_one_run_of_a_whole_tensor_are_read_whole() -> None:
    def fn(seq: tf.Tensor, x: tf.Tensor, h: tf.Tensor) -> Any:
        return (
            tf.slice(seq, [0, 2, 3], [-1, 2, 4]),  # two runs of each row
            tf.slice(x, [1, 0], [2, -1]),  # some rows only
            tf.slice(tf.concat([h, h], 1), [0, 3], [-1, 4]),  # of two tensors
            tf.slice(tf.slice(h, [0, 2], [-1, 8]), [0, 1], [-1, 3]),  # of a run
        )

    graph = graph_of(fn, spec(None, 6, 8), spec(4, 16), spec(None, 16))
    assert segments(graph, "Slice") == [Segment(ref("Slice"), 0, 8, 8)]
    assert segments(graph, "Slice_1", 2) == [Segment(ref("Slice_1"), 0, 16, 16)]
    with pytest.raises(NotInPlace):  # 4 rows are x's, not the operand's: not read from x
        segments(graph, "Slice_1", 4)
    assert segments(graph, "Slice_2") == [Segment(ref("Slice_2"), 0, 4, 4)]
    assert segments(graph, "Slice_4") == [Segment(ref("Slice_4"), 0, 3, 3)]


def test_views_that_keep_the_rows_are_read_through() -> None:
    def fn(x: tf.Tensor, y: tf.Tensor, z: tf.Tensor, seq: tf.Tensor) -> Any:
        return (
            tf.identity(x),
            tf.squeeze(tf.slice(seq, [0, 4, 0], [-1, 1, 8]), axis=[-2]),
            tf.expand_dims(x, -1),
            tf.reshape(y, [4, 16]),  # static rows: provably kept
            tf.reshape(seq, [-1, 8]),  # unknown rows: not provable
            tf.squeeze(z),  # no axes named: it might squeeze the rows
            tf.expand_dims(x, 0),
            tf.expand_dims(x, -3),  # axis 0 too
            tf.squeeze(tf.expand_dims(y, 0), axis=[-4]),  # squeezes the rows' axis
        )

    graph = graph_of(fn, spec(None, 16), spec(4, 2, 8), spec(4, 1, 8), spec(None, 6, 8))
    x = [Segment(ref("x"), 0, 16, 16)]
    assert segments(graph, "Identity") == x and segments(graph, "ExpandDims") == x
    assert segments(graph, "Squeeze") == [Segment(ref("seq"), 32, 48, 8)]
    assert segments(graph, "Reshape", 4) == [Segment(ref("y"), 0, 16, 16)]
    assert segments(graph, "Reshape_1") == [Segment(ref("Reshape_1"), 0, 8, 8)]
    assert segments(graph, "Squeeze_1", 4) == [Segment(ref("Squeeze_1"), 0, 8, 8)]
    views = ("Identity", "Squeeze", "ExpandDims", "Reshape", "Reshape_1", "Squeeze_1")
    rows_axis = ("ExpandDims_1", "ExpandDims_2", "Squeeze_2")
    kept = [keeps_rows(graph, graph.node(n)) for n in views + rows_axis]
    assert kept == [True, True, True, True, False, False, False, False, False]


def test_fed_tensors_and_ops_after_control_edges_are_read_as_they_are() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [4, 16], name="x")
        tf.identity(x, name="fed")
        tf.identity(x, name="plain")
        with tf.control_dependencies([tf.no_op(name="first")]):
            tf.identity(x, name="after")

    graph = v1_graph(build, inputs=["x", "fed"])
    assert segments(graph, "plain", 4) == [Segment(ref("x"), 0, 16, 16)]
    assert segments(graph, "fed", 4) == [Segment(ref("fed"), 0, 16, 16)]
    assert segments(graph, "after", 4) == [Segment(ref("after"), 0, 16, 16)]


def test_an_operand_computed_in_the_group_is_refused() -> None:
    def fn(x: tf.Tensor, h: tf.Tensor) -> Any:
        return tf.concat([tf.identity(tf.exp(x)), h], axis=1)

    graph = graph_of(fn, spec(None, 8), spec(None, 16))
    for name in ("Exp", "concat"):  # itself, or a part behind a concat and a view
        with pytest.raises(NotInPlace, match="operand Exp:0 of a matmul is computed in the group"):
            segments(graph, name, members={"Exp"})
    assert segments(graph, "h", members={"Exp"}) == [Segment(ref("h"), 0, 16, 16)]


@pytest.mark.parametrize(
    ("shape", "rows"),
    [((None, None), None), ((4, 16), 5), ((4, 16), None), ((None, 16), 4), ((), None)],
)
def test_an_operand_without_a_static_row_layout_is_refused(
    shape: tuple[int | None, ...], rows: int | None
) -> None:
    graph = graph_of(lambda x: x, spec(*shape))
    with pytest.raises(NotInPlace, match="matmul operand x:0 has no static row layout"):
        segments(graph, "x", rows)


def test_static_product_and_same_dims() -> None:
    assert static_product(()) == 1 and static_product((2, 3, 4)) == 24
    assert static_product((0, 5)) == 0 and static_product((2, None)) is None
    assert same_dims((None, 8), (None, 8)) and same_dims((), ())
    assert not same_dims((4,), (None,)) and not same_dims((4,), (4, 1))
