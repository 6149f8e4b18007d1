"""view-copies: a Slice read by several stitchable ops gets a copy per reader."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from conftest import assert_close
from graph_helpers import assert_same_values, ops, run_pass, v1_graph

import tf_stitch
from tf_stitch.passes.view_copies import rejoin_view_copies, view_copies

W = np.random.default_rng(0).normal(size=(16, 24)).astype(np.float32)


def build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 16], name="x")
    gates = tf.matmul(x, tf.constant(W), name="gates")
    z = tf.slice(gates, [0, 0], [-1, 8], name="z")  # read by two elementwise ops and a matmul
    tf.sigmoid(z, name="update")
    tf.tanh(z, name="candidate")
    tf.matmul(z, tf.constant(W[:8]), name="projected")
    r = tf.slice(gates, [0, 8], [-1, 8], name="r")  # read once: stays as it is
    tf.exp(r, name="reset")


def test_each_stitchable_reader_gets_its_own_copy() -> None:
    outputs = ["update", "candidate", "projected", "reset"]
    g = v1_graph(build, inputs=["x"], outputs=outputs)
    out = run_pass(view_copies, g)
    assert ops(out)["Slice"] == ops(g)["Slice"] + 2
    sources = {name: out.node(name).inputs[0].node for name in ("update", "candidate")}
    assert "z" not in sources.values() and len(set(sources.values())) == 2
    assert out.node("projected").inputs[0].node == "z"  # the library call keeps the original
    assert out.node("reset").inputs[0].node == "r"
    for name in sources.values():
        assert out.node(name).inputs == g.node("z").inputs
    assert_same_values(g, out)


def test_integer_slices_stay_shared() -> None:
    """Ids sliced per feature and normalized (`i < 0 ? i + n : i`) before a gather: the
    gather's kernel reads the three readers through one pattern, so the slice keeps them."""

    def build_ids() -> None:
        ids = tf.compat.v1.placeholder(tf.int32, [None, 4], name="ids")
        first = tf.slice(ids, [0, 0], [-1, 1], name="first")
        tf.where(first < 0, first + 10, first, name="normalized")

    g = v1_graph(build_ids, inputs=["ids"], outputs=["normalized"])
    out = run_pass(view_copies, g)
    assert ops(out)["Slice"] == 1


def test_copies_that_joined_no_kernel_are_one_slice_again() -> None:
    outputs = ["update", "candidate", "projected", "reset"]
    g = v1_graph(build, inputs=["x"], outputs=outputs)
    out = run_pass(rejoin_view_copies, run_pass(view_copies, g))  # nothing was planned
    assert ops(out) == ops(g)
    for name in ("update", "candidate", "projected"):
        assert out.node(name).inputs[0].node == "z"
    assert_same_values(g, out)


def test_the_copies_join_their_readers_kernels() -> None:
    def cell(x: tf.Tensor, h: tf.Tensor) -> tf.Tensor:
        gates = tf.matmul(x, tf.constant(W))
        z = gates[:, :8]  # read before and after the second matmul: by two kernels
        projected = tf.matmul(tf.tanh(z * 0.5) * 2.0, tf.constant(W[:8, :8]))
        return tf.sigmoid(z) * h + projected * gates[:, 8:16]

    spec = [tf.TensorSpec([None, 16]), tf.TensorSpec([None, 8])]
    f = tf.function(cell, input_signature=spec)
    opt = tf_stitch.optimize(f)
    assert "Slice" not in {n.op for n in opt.graph_def.node}
    rng = np.random.default_rng(1)
    x, h = (tf.constant(rng.normal(size=(5, d)), tf.float32) for d in (16, 8))
    assert_close(f(x, h), opt(x, h))
