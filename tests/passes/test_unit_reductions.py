"""unit-reductions: reductions over size-1 axes only (or none) become Reshapes, in any dtype;
a reduction over a longer axis stays."""

from __future__ import annotations

import tensorflow as tf
from graph_helpers import assert_same_values, ops, run_pass, v1_graph

from tf_stitch.passes.unit_reductions import unit_reductions


def test_a_losss_count_of_one_packed_batch_is_a_reshape() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        batch = tf.stack([tf.shape(x)[0]])  # Keras: Prod(Pack([batch]))
        count = tf.reduce_prod(batch, name="count")
        flags = tf.compat.v1.placeholder(tf.bool, [None, 1], name="flags")
        any_flag = tf.reduce_any(flags, axis=1, name="any_flag")
        peak = tf.reduce_max(tf.reshape(x, [-1, 1, 3]), axis=1, name="peak")  # NaNs kept
        total = tf.reduce_sum(tf.reduce_sum(x, 1), name="total")  # over the batch: stays
        out = tf.reduce_sum(peak, 1) / tf.cast(count, tf.float32) + total
        tf.identity(tf.where(any_flag, out, -out), name="out")

    g = v1_graph(build, inputs=["x", "flags"], outputs=["out"])
    out = run_pass(unit_reductions, g)
    for name in ("count", "any_flag", "peak"):
        assert out.node(name).op == "Reshape", name
    assert out.node("total").op == "Sum"
    assert ops(out)["Prod"] == 0 and ops(out)["Any"] == 0
    assert_same_values(g, out, batch=5)


def test_a_reduction_with_two_unknown_sizes_left_stays() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 1, None], name="x")
        tf.identity(tf.reduce_sum(x, 1, name="s") * 2.0, name="out")

    g = v1_graph(build, inputs=["x"], outputs=["out"])
    out = run_pass(unit_reductions, g)
    assert out.node("s").op == "Sum"  # a Reshape target could hold one -1 only
