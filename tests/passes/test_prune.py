"""prune: keeps what the fetches, targets and feeds reach backwards, drops the rest."""

from __future__ import annotations

import pytest
import tensorflow as tf
from graph_helpers import assert_same_values, ref, run_pass, v1_graph

from tf_stitch.passes.base import PassContext
from tf_stitch.passes.prune import prune


def build() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
    tf.compat.v1.placeholder(tf.float32, [3], name="unused_input")
    tf.negative(x, name="dead")
    tf.constant(1.0, name="dead_const")
    gate = tf.nn.relu(x, name="gate")
    with tf.control_dependencies([gate]):
        y = tf.identity(x * 2.0, name="y")
    tf.exp(y, name="out")
    with tf.control_dependencies([tf.sigmoid(x, name="effect_input")]):
        tf.no_op(name="effect")


def test_keeps_fetches_targets_feeds_and_their_ancestors() -> None:
    g = v1_graph(build, outputs=["out"])
    g.targets = ["effect"]
    out = run_pass(prune, g)
    assert "dead" not in out and "dead_const" not in out
    for name in ("x", "unused_input", "gate", "y", "out", "effect", "effect_input", "mul/y"):
        assert name in out, name
    assert out.inputs == g.inputs and out.outputs == g.outputs and out.targets == ["effect"]
    assert list(out.nodes) == [n for n in g.nodes if n in out]  # order kept
    assert_same_values(g, out)


def test_without_targets_effects_are_dropped() -> None:
    g = v1_graph(build, outputs=["out"])
    g.targets = []
    out = run_pass(prune, g)
    assert "effect" not in out and "effect_input" not in out


def test_unknown_fetch_is_an_error() -> None:
    g = v1_graph(build, outputs=["out"])
    g.outputs.append(ref("ghost"))
    with pytest.raises(KeyError, match="ghost"):
        prune.run(g, PassContext())
