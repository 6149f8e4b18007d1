"""layout.analyze: a group's iteration domain, its split, and where each tensor is placed."""

from __future__ import annotations

import math

import tensorflow as tf
from layout_helpers import forbid_reason, graph_of, layout_of

from tf_stitch.fusion.cost_model import PERIODIC_ROW_ELEMENTS
from tf_stitch.fusion.layout_types import FULL, OUTER, Placement
from tf_stitch.fusion.op_kinds import OpKind, op_kind
from tf_stitch.fusion.static_args import reduction_axes
from tf_stitch.graph.ir import Graph, TensorRef


def ref(graph: Graph, op: str) -> TensorRef:
    (node,) = [n for n in graph if n.op == op]
    return node.output(0)


S = tf.TensorSpec


# -- elementwise (loop) groups --------------------------------------------------------------------
def test_same_shape_elementwise_is_one_contiguous_loop() -> None:
    _, layout = layout_of(lambda x, y: tf.exp(x) * y, S([4, 32]), S([4, 32]))
    assert (layout.kind, layout.domain) == ("loop", (4, 32))
    assert layout.split == 0  # every operand reads the whole domain contiguously


def test_bias_broadcast_splits_rows_and_places_the_bias_on_the_inner_axis() -> None:
    graph, layout = layout_of(lambda x, b: tf.tanh(x + b), S([4, 2048]), S([2048]))
    assert (layout.kind, layout.domain, layout.split) == ("loop", (4, 2048), 1)
    bias = layout.placements[TensorRef("b")]
    assert (bias.frame, bias.dims, bias.axes) == (FULL, (2048,), (1,))
    assert bias.broadcast_axes(layout.domain) == {0}
    assert not layout.is_row_level(TensorRef("b"))
    assert not layout.is_row_level(ref(graph, "Tanh"))


def test_a_bias_of_few_channels_repeats_along_rows_of_several_pixels() -> None:
    """LeNet-5's first bias: rows of 6 channels would be units of 6 elements; the bias is
    periodic along rows of whole image lines, which the CPU kernel reads from a repeated copy."""
    _, layout = layout_of(lambda x, b: tf.tanh(x + b), S([32, 28, 28, 6]), S([6]))
    assert layout.split < 3
    assert 6 < math.prod(d or 1 for d in layout.domain[layout.split :]) <= PERIODIC_ROW_ELEMENTS
    # no repeat is longer than the bound: rows of [2, 4096] + [4096] stay one image row each
    _, wide = layout_of(lambda x, b: tf.tanh(x + b), S([2, 3, 4096]), S([4096]))
    assert wide.split == 2


def test_column_vector_is_one_value_per_row() -> None:
    _, layout = layout_of(lambda x, s: tf.exp(x) * s, S([64, 128]), S([64, 1]))
    assert layout.split == 1
    assert layout.is_row_level(TensorRef("s"))
    assert layout.placements[TensorRef("s")].broadcast_axes(layout.domain) == {1}


def test_split_moves_inward_until_every_input_reads_its_row_contiguously() -> None:
    _, layout = layout_of(lambda x, b: tf.exp(x) + b, S([2, 3, 4096]), S([3, 1]))
    assert layout.domain == (2, 3, 4096)
    assert layout.split == 2  # b varies along axis 1 but not axis 2
    assert layout.placements[TensorRef("b")].axes == (1, 2)
    assert layout.is_row_level(TensorRef("b"))


def test_unknown_sizes_are_allowed_where_every_operand_is_unknown() -> None:
    _, layout = layout_of(lambda x, y: tf.exp(x) - y, S([None, 8]), S([None, 8]))
    assert layout.domain == (None, 8)


def test_unknown_size_against_a_known_size_is_refused_as_ambiguous() -> None:
    reason = forbid_reason(lambda x, y: tf.exp(x) - y, S([None, 8]), S([4, 8]))
    assert "the broadcast is ambiguous" in reason


def test_unknown_rank_has_no_layout() -> None:
    reason = forbid_reason(lambda x: tf.exp(x) * 2.0, S(None))
    assert "has an unknown rank" in reason


# -- row (reduction) groups ---------------------------------------------------------------------
def layer_norm(x: tf.Tensor) -> tf.Tensor:
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.square(x - m), -1, keepdims=True)
    return (x - m) * tf.math.rsqrt(v + 1e-5)


def test_layer_norm_is_a_row_group_over_the_input_shape() -> None:
    graph, layout = layout_of(layer_norm, S([None, 64]))
    assert (layout.kind, layout.domain, layout.split) == ("row", (None, 64), 1)
    assert layout.inner == (64,)
    mean = graph.node("Mean").output(0)
    assert layout.placements[mean] == Placement(FULL, (None, 1), (0, 1))
    assert layout.is_row_level(mean)
    assert layout.is_row_level(ref(graph, "Rsqrt"))
    assert not layout.is_row_level(ref(graph, "Square"))
    assert not layout.is_row_level(TensorRef("x"))


def test_reduction_without_keepdims_lives_in_the_outer_frame() -> None:
    graph, layout = layout_of(
        lambda x: tf.exp(x) - tf.expand_dims(tf.reduce_sum(x, -1), -1), S([4, 8])
    )
    total = layout.placements[ref(graph, "Sum")]
    assert (total.frame, total.dims, total.axes) == (OUTER, (4,), (0,))
    expanded = layout.placements[ref(graph, "ExpandDims")]
    assert (expanded.frame, expanded.dims, expanded.axes) == (FULL, (4, 1), (0, 1))


def test_reduction_over_the_two_innermost_axes_splits_before_them() -> None:
    _, layout = layout_of(
        lambda x: x * tf.reduce_max(tf.exp(x), axis=[1, 2], keepdims=True), S([2, 3, 4])
    )
    assert (layout.kind, layout.split, layout.inner) == ("row", 1, (3, 4))


def test_reduction_axes_are_normalized_and_sorted() -> None:
    graph = graph_of(lambda x: tf.reduce_sum(x, axis=[-1, 1]), S([2, 3, 4]))
    assert reduction_axes(graph, graph.node("Sum")) == (1, 2)


def test_column_reduction_reorders_the_domain_kept_axes_first() -> None:
    graph, layout = layout_of(lambda x: tf.reduce_sum(tf.exp(x), 0), S([4, 8]))
    assert (layout.kind, layout.domain, layout.split) == ("column", (8, 4), 1)
    x = layout.placements[TensorRef("x", 0)]
    assert (x.dims, x.axes) == ((4, 8), (1, 0))  # x's rows run along the unit's loop
    total = layout.placements[ref(graph, "Sum")]
    assert (total.frame, total.dims, total.axes) == (OUTER, (8,), (0,))


def test_batch_statistics_over_n_h_w_keep_the_channels_as_units() -> None:
    def fn(x: tf.Tensor) -> tf.Tensor:
        mean = tf.reduce_mean(x, [0, 1, 2], keepdims=True)
        return x - mean

    graph, layout = layout_of(fn, S([2, 3, 5, 8]))
    assert (layout.kind, layout.domain, layout.split) == ("column", (8, 2, 3, 5), 1)
    mean = layout.placements[ref(graph, "Mean")]
    assert (mean.frame, mean.dims, mean.axes) == (FULL, (1, 1, 1, 8), (1, 2, 3, 0))
    assert layout.is_row_level(ref(graph, "Mean"))


def test_reduction_over_a_middle_axis_keeps_the_axes_around_it() -> None:
    graph, layout = layout_of(lambda a, h: tf.reduce_sum(a * h, 1), S([2, 7, 1]), S([2, 7, 16]))
    assert (layout.kind, layout.domain, layout.split) == ("column", (2, 16, 7), 2)
    weights = layout.placements[TensorRef("a", 0)]
    assert weights.axes == (0, 2, 1)
    assert layout.placements[ref(graph, "Sum")].axes == (0, 1)


def test_column_reductions_do_not_take_matmul_tiles() -> None:
    reason = forbid_reason(lambda x, w: tf.reduce_sum(tf.matmul(x, w), 0), S([8, 4]), S([4, 4]))
    assert "reduction over outer axes" in reason


def test_reductions_over_different_axes_are_refused() -> None:
    def fn(x: tf.Tensor) -> tf.Tensor:
        a = tf.reduce_sum(x, -1, keepdims=True)
        return tf.reduce_sum(x - a, [1, 2])

    reason = forbid_reason(fn, S([2, 3, 4]))
    assert "reduces axes [1, 2]" in reason and "axes [2]" in reason


def test_per_row_and_per_element_operands_do_not_mix() -> None:
    # numpy broadcasting would pair the row sums with columns, not rows
    reason = forbid_reason(lambda x: tf.exp(x) - tf.reduce_sum(x, -1), S([4, 4]))
    assert "mixes per-row and per-element operands" in reason


def test_a_reshape_that_changes_the_layout_is_not_a_free_view() -> None:
    def fn(x: tf.Tensor) -> tf.Tensor:
        y = x - tf.reduce_sum(x, -1, keepdims=True)
        return tf.reshape(y, [128]) * 2.0

    reason = forbid_reason(fn, S([4, 32]))
    assert "(Reshape) changes the data layout; not a free view here" in reason


def test_a_reshape_that_only_adds_a_leading_unit_dim_is_a_free_view() -> None:
    graph, layout = layout_of(lambda x: tf.reshape(tf.exp(x), [1, 4, 32]) + 1.0, S([4, 32]))
    assert layout.domain == (1, 4, 32)
    assert layout.placements[ref(graph, "Exp")].axes == (1, 2)
    assert layout.placements[ref(graph, "Reshape")].axes == (0, 1, 2)
    assert op_kind("Reshape") is OpKind.RESHAPE


def test_a_scalar_computed_per_element_is_read_per_row_too() -> None:
    # a loss: the total over the batch divided by a count computed in the group (one value
    # everywhere, so the per-row division may read it)
    def fn(x: tf.Tensor, n: tf.Tensor) -> tf.Tensor:
        return tf.math.divide_no_nan(tf.reduce_sum(x), tf.cast(n, tf.float32) * 2.0)

    graph, layout = layout_of(fn, S([6]), tf.TensorSpec([], tf.int32))
    count = layout.placements[ref(graph, "Mul")]
    assert (count.frame, count.dims) == (FULL, ())
    assert layout.placements[ref(graph, "DivNoNan")].frame == OUTER


def test_a_row_vector_computed_per_element_still_does_not_mix_with_row_values() -> None:
    reason = forbid_reason(lambda x, b: tf.reduce_sum(x, -1) * tf.exp(b), S([4, 4]), S([4]))
    assert "mixes per-row and per-element operands" in reason
