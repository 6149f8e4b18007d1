"""fold-constants: small stateless computations on constants become constants."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from graph_helpers import assert_same_values, ref, run_pass, v1_graph

from tf_stitch.graph.ir import DType, TensorInfo
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext
from tf_stitch.passes.fold_constants import MAX_FOLDED_ELEMENTS, fold_constants
from tf_stitch.passes.split_slices import split_slices

VAR = np.float32([0.5, 1.0, 2.0])


def build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
    scale = tf.math.rsqrt(tf.constant(VAR) + 1e-3, name="scale")
    offset = tf.subtract(tf.constant([1.0, 1.0, 1.0]), scale * 2.0, name="offset")
    cols = tf.cast(tf.reduce_prod(tf.constant([3, 1])), tf.float32, name="cols")
    y = tf.add(x * scale, offset, name="y")
    tf.divide(y, cols, name="out")


def test_folds_constant_subgraphs_with_tensorflow_values() -> None:
    g = v1_graph(build, outputs=["out"])
    out = run_pass(fold_constants, g)
    for name in ("scale", "offset", "cols"):
        assert out.node(name).op == "Const", name
        assert out.node(name).outputs == g.node(name).outputs
    expected = 1.0 / np.sqrt(VAR + np.float32(1e-3))
    np.testing.assert_allclose(constant_value(out, ref("scale")), expected, rtol=1e-6)
    assert constant_value(out, ref("cols")).dtype == np.float32
    assert out.node("cols").attrs["dtype"] == DType("float32")
    for name in ("y", "out"):
        assert out.node(name).op == g.node(name).op, name
    assert out.outputs == [ref("out")]
    assert_same_values(g, out)


def test_a_tensordot_gradients_inverted_permutation_becomes_a_constant() -> None:
    """`tf.tensordot`'s gradient transposes by `InvertPermutation(concat(free, axes))`."""

    def build_perm() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3, 4], name="x")
        perm = tf.concat([tf.constant([0, 2]), tf.constant([1])], 0, name="perm")
        inverse = tf.math.invert_permutation(perm, name="inverse")
        tf.transpose(x, inverse, name="out")

    g = v1_graph(build_perm, outputs=["out"])
    out = run_pass(fold_constants, g)
    assert out.node("inverse").op == "Const"
    np.testing.assert_array_equal(constant_value(out, ref("inverse")), [0, 2, 1])
    assert_same_values(g, out)


def shapes_build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [2, 3, 4], name="x")
    u = tf.compat.v1.placeholder(tf.float32, [None, 4], name="u")
    tf.shape(x, name="shape")
    tf.shape(x, out_type=tf.int64, name="shape64")
    tf.size(x, name="size")
    tf.rank(x, name="rank")
    tf.shape(u, name="partial_shape")
    tf.reshape(u, tf.shape(x)[1:], name="uses_shape")


def test_static_shapes_become_constants_without_computing_the_input() -> None:
    g = v1_graph(shapes_build, outputs=["shape", "shape64", "size", "rank", "partial_shape"])
    out = run_pass(fold_constants, g)
    assert constant_value(out, ref("shape")).tolist() == [2, 3, 4]
    assert constant_value(out, ref("shape64")).dtype == np.int64
    assert constant_value(out, ref("size")) == 24
    assert constant_value(out, ref("rank")) == 3
    assert out.node("shape").outputs == [TensorInfo("int32", (3,))]
    assert out.node("partial_shape").op == "Shape"  # (None, 4) is not a value


def negatives() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
    tf.fill([MAX_FOLDED_ELEMENTS + 1], 1.0, name="large")
    tf.fill([MAX_FOLDED_ELEMENTS], 1.0, name="just_small_enough")
    noise = tf.raw_ops.RandomUniform(shape=[3], dtype=tf.float32, name="noise")
    tf.add(noise, 1.0, name="reads_noise")
    tf.add(x, 1.0, name="reads_input")
    c = tf.constant([1.0, 2.0, 3.0], name="c")
    with tf.control_dependencies([tf.no_op(name="first")]):
        tf.negative(c, name="ordered")
    tf.negative(c, name="fed")
    tf.add(tf.negative(c, name="fed_too"), 1.0, name="reads_fed")
    tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]), name="matmul")  # not a fusible kind
    tf.unstack(c, name="multi_output")


def test_does_not_fold_large_stateful_ordered_fed_or_opaque_ops() -> None:
    g = v1_graph(negatives, inputs=["x", "fed", "fed_too"])
    out = run_pass(fold_constants, g)
    assert out.node("just_small_enough").op == "Const"
    for name in (
        "large",
        "noise",
        "reads_noise",
        "reads_input",
        "ordered",
        "fed",
        "fed_too",
        "reads_fed",
        "matmul",
        "multi_output",
    ):
        assert out.node(name).op == g.node(name).op, name


def test_nothing_to_fold_leaves_the_graph_equal() -> None:
    def build_plain() -> None:
        tf.nn.relu(tf.compat.v1.placeholder(tf.float32, [2], name="x"), name="r")

    g = v1_graph(build_plain)
    out = run_pass(fold_constants, g)
    assert [(n.name, n.op) for n in out] == [(n.name, n.op) for n in g]


def test_does_not_fold_readers_of_a_fed_constant() -> None:
    def build_fed() -> None:
        c = tf.constant([1.0, 2.0], name="c")
        tf.multiply(c, 2.0, name="doubled")

    g = v1_graph(build_fed, inputs=["c"], outputs=["doubled"])
    out = run_pass(fold_constants, g)
    assert out.node("doubled").op == "Mul"
    assert_same_values(g, out)


def test_static_sizes_read_from_a_partly_known_shape_become_constants() -> None:
    def build_causal_mask() -> None:
        q = tf.compat.v1.placeholder(tf.float32, [None, 5, 8], name="q")
        s = tf.shape(q)
        length = tf.identity(s[1], name="length")  # known: 5, although the batch is not
        ones = tf.ones(tf.stack([length, length]), name="ones")
        tf.linalg.band_part(ones, -1, 0, name="mask")
        tf.identity(s[0], name="batch")

    g = v1_graph(build_causal_mask, inputs=["q"], outputs=["mask", "batch"])
    out = run_pass(fold_constants, split_slices.run(g, PassContext()))
    assert constant_value(out, ref("length")) == 5
    mask = constant_value(out, ref("mask"))
    assert mask is not None and mask.tolist() == np.tril(np.ones([5, 5])).tolist()
    assert out.node("batch").op != "Const"  # the batch is known only at run time
    assert_same_values(g, out)


def test_an_axis_computed_modulo_a_rank_folds_and_then_the_size_at_it() -> None:
    """A layer norm's gradient takes `Prod(Gather(Shape(x), axes % rank))`: the modulo folds
    (TensorFlow computes it), then the size it picks is static although the batch is not."""

    def build_moments_count() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 4, 6], name="x")
        axes = tf.math.floormod(tf.constant([-1]), tf.rank(x), name="axes")
        count = tf.reduce_prod(tf.gather(tf.shape(x), axes), name="count")
        tf.identity(tf.reduce_sum(x, -1) / tf.cast(count, tf.float32), name="out")

    g = v1_graph(build_moments_count, inputs=["x"], outputs=["out"])
    out = run_pass(fold_constants, g)
    assert constant_value(out, ref("axes")).tolist() == [2]
    assert constant_value(out, ref("count")) == 6
    assert_same_values(g, out)
