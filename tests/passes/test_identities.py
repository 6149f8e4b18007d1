"""forward-identities: identity-like nodes vanish unless fed, fetched or ordered."""

from __future__ import annotations

import tensorflow as tf
from graph_helpers import assert_same_values, ops, ref, run_pass, v1_graph

from tf_stitch.passes.identities import forward_identities


def build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 2, 3], name="x")
    a = tf.identity(x, name="id")
    b = tf.stop_gradient(a, name="stop")
    c = tf.raw_ops.Snapshot(input=b, name="snap")
    d = tf.transpose(c, [0, 1, 2], name="same")
    e = tf.transpose(d, [0, 2, 1], name="swap")
    tf.nn.relu(e, name="out")


def test_forwards_identity_like_nodes() -> None:
    g = v1_graph(build, outputs=["out"])
    out = run_pass(forward_identities, g)
    for name in ("id", "stop", "snap", "same"):
        assert name not in out
    assert out.node("swap").inputs[0] == ref("x")
    assert ops(out)["Transpose"] == 1
    assert "same/perm" in out  # the permutation constant is left for prune
    assert out.outputs == [ref("out")]
    assert_same_values(g, out)


def edges_build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
    fetched = tf.identity(x, name="fetched")
    fed = tf.identity(x, name="fed")
    gate = tf.identity(x, name="gate")
    with tf.control_dependencies([gate]):
        waits = tf.identity(x, name="waits")
    with tf.device("/device:CPU:0"):
        moved = tf.identity(x, name="moved")
    perm = tf.compat.v1.placeholder(tf.int32, [1], name="perm")
    dyn = tf.transpose(x, perm, name="dynamic_perm")
    tf.add_n([fetched, fed, waits, moved, dyn], name="sum")


def test_does_not_forward_fetched_fed_or_control_edged_identities() -> None:
    g = v1_graph(edges_build, inputs=["x", "perm", "fed"], outputs=["sum", "fetched"])
    out = run_pass(forward_identities, g)
    for name in ("fetched", "fed", "gate", "waits", "moved", "dynamic_perm"):
        assert name in out, name
    assert out.node("sum").inputs == g.node("sum").inputs


def test_does_not_forward_a_target() -> None:
    def build_target() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        tf.identity(x, name="kept")

    g = v1_graph(build_target, outputs=[])
    g.targets = ["kept"]
    assert "kept" in run_pass(forward_identities, g)


def test_does_not_forward_a_transpose_whose_permutation_is_fed() -> None:
    def build_fed_perm() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
        tf.nn.relu(tf.transpose(x, tf.constant([0, 1], name="perm"), name="t"), name="out")

    g = v1_graph(build_fed_perm, inputs=["x", "perm"], outputs=["out"])
    out = run_pass(forward_identities, g)
    assert "t" in out


def test_readers_of_an_identity_n_read_its_matching_inputs() -> None:
    def build_n() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        y, z = tf.identity_n([tf.nn.sigmoid(x) * x, x], name="idn")
        tf.identity(y + 1.0, name="out")
        tf.identity(z * 2.0, name="other")

    g = v1_graph(build_n, outputs=["out", "other"])
    out = run_pass(forward_identities, g)
    assert ops(out)["IdentityN"] == 0
    assert_same_values(g, out)
