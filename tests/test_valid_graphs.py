"""Valid graphs tf_stitch once broke (issue 18): lowered conditionals and loops, fetched outputs
of multi-output ops, and inputs whose unknown sizes are unrelated. Each optimized graph must
give TensorFlow's answers under the names the caller asked for."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close
from graph_helpers import run_graph_def, v1_graph_def

import tf_stitch

pytestmark = pytest.mark.usefixtures("kernel_cache")
RNG = np.random.default_rng(18)


def _kernels(gd: Any) -> int:
    return sum(n.op == "StitchedKernel" for n in gd.node)


def _same_answers(
    build: Callable[[], Any],
    inputs: Sequence[str],
    outputs: Sequence[str],
    feeds: Sequence[dict[str, Any]],
) -> Any:
    """Optimizes the graph `build` makes; checks every feed against TensorFlow's answers."""
    gd = v1_graph_def(build)
    opt = tf_stitch.optimize(gd, inputs=list(inputs), outputs=list(outputs))
    for feed in feeds:
        assert_close(run_graph_def(gd, feed, outputs), run_graph_def(opt, feed, outputs))
    return opt


def _values(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# -- lowered conditionals (Switch / Merge) and loops -------------------------------------------
def _cond(depth: int) -> Callable[[], None]:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
        p = tf.compat.v1.placeholder_with_default(False, [], name="p")
        f, t = tf.raw_ops.Switch(data=x, pred=p)
        if depth > 1:  # the stitchable ops one level deeper, behind an Identity and an op
            f, t = tf.exp(tf.identity(f)), tf.tanh(tf.identity(t))
        y, _ = tf.raw_ops.Merge(inputs=[t * 2.0, f * 3.0])
        tf.identity(y, name="out")

    return build


@pytest.mark.parametrize("depth", [1, 2])
def test_both_branches_of_a_lowered_cond_stay_apart(depth: int) -> None:
    x = np.array([[1, 2], [-3, -4]], np.float32)
    opt = _same_answers(_cond(depth), ["x"], ["out:0"], [{"x:0": x}, {"x:0": x, "p:0": True}])
    if depth == 1:
        out = run_graph_def(opt, {"x:0": x}, ["out:0"])[0]
        np.testing.assert_array_equal(out, [[3, 6], [-9, -12]])
    else:
        assert _kernels(opt) == 2  # one per branch


def _lowered_graph_def(build: Callable[[], None]) -> Any:
    """The GraphDef of `build` with TF1's control flow (Switch/Merge, Enter/Exit, ...)."""
    tf.compat.v1.disable_control_flow_v2()
    try:
        return v1_graph_def(build)
    finally:
        tf.compat.v1.enable_control_flow_v2()


def _tf1_cond_and_loop() -> None:
    x = tf.compat.v1.placeholder(tf.float32, [None, 8], name="x")
    p = tf.compat.v1.placeholder_with_default(True, [], name="p")
    y = tf.compat.v1.cond(p, lambda: tf.nn.softmax(x * 2.0) + 1.0, lambda: tf.exp(x) * 3.0 - 1.0)

    def body(i: tf.Tensor, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return i + 1, tf.tanh(h * 0.5 + y) * 2.0 - 1.0

    _, h = tf.compat.v1.while_loop(lambda i, h: i < 3, body, [0, y])
    tf.identity(tf.sigmoid(h) * 2.0 + 1.0, name="out")


def test_a_tf1_cond_and_while_loop_are_stitched_inside_their_frames() -> None:
    gd = _lowered_graph_def(_tf1_cond_and_loop)
    assert {"Switch", "Merge", "Enter", "Exit", "NextIteration"} <= {n.op for n in gd.node}
    opt = tf_stitch.optimize(gd, inputs=["x"], outputs=["out:0"])
    for p in (True, False):
        for batch in (1, 5):
            feed = {"x:0": _values(batch, 8), "p:0": p}
            assert_close(run_graph_def(gd, feed, ["out:0"]), run_graph_def(opt, feed, ["out:0"]))
    assert _kernels(opt) >= 2  # the branches' and the loop body's ops, each in its own frame


def _tf1_cond_of_a_computed_value() -> None:
    # tf.compat.v1.cond colocates the Switch of each value it reads with that value's producer
    x = tf.compat.v1.placeholder(tf.float32, [None, 16], name="x")
    training = tf.compat.v1.placeholder_with_default(False, [], name="training")
    h = tf.nn.relu(x * 2.0 + 1.0)
    h = tf.compat.v1.cond(training, lambda: h * 0.5 + 0.1, lambda: tf.nn.gelu(h) * 1.5)
    mean, var = tf.nn.moments(h, [1], keepdims=True)
    tf.identity((h - mean) * tf.math.rsqrt(var + 1e-3), name="y")


def test_a_tf1_cond_of_a_stitched_value_keeps_its_colocations_valid() -> None:
    gd = _lowered_graph_def(_tf1_cond_of_a_computed_value)
    assert any(b"loc:@" in b"".join(n.attr["_class"].list.s) for n in gd.node)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "failed validation; returning the original"
        opt = tf_stitch.optimize(gd, inputs=["x"], outputs=["y:0"])
    assert _kernels(opt) >= 3  # before, each branch, after
    for training in (False, True):
        feed = {"x:0": _values(4, 16), "training:0": training}
        assert_close(run_graph_def(gd, feed, ["y:0"]), run_graph_def(opt, feed, ["y:0"]))


# -- fetched outputs of multi-output ops ---------------------------------------------------------
def _split(consumed: bool) -> Callable[[], None]:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [3, 30], name="x")
        pieces = tf.split(tf.exp(x) * 2.0, [4, 15, 11], 1, name="s")
        if consumed:
            tf.identity(tf.reduce_sum(pieces[1], 1) + 1.0, name="used")

    return build


def test_every_fetched_piece_of_a_split_keeps_its_name() -> None:
    outputs = ["s:0", "s:1", "s:2"]
    opt = _same_answers(_split(False), ["x"], outputs, [{"x:0": _values(3, 30)}])
    assert "s" in {n.name for n in opt.node} and _kernels(opt) >= 1


def test_split_pieces_fetched_and_consumed() -> None:
    outputs = ["s:2", "used:0", "s:1"]
    _same_answers(_split(True), ["x"], outputs, [{"x:0": _values(3, 30)}])


def test_unstack_outputs_fetched_by_index() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [4, 3, 8], name="x")
        tf.unstack(tf.tanh(x) + 1.0, axis=1, name="u")

    _same_answers(build, ["x"], ["u:2", "u:0"], [{"x:0": _values(4, 3, 8)}])


# -- unrelated unknown sizes ---------------------------------------------------------------------
def test_independent_values_of_unrelated_unknown_sizes() -> None:
    @tf.function(input_signature=[tf.TensorSpec([None]), tf.TensorSpec([None])])
    def f(a: tf.Tensor, b: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return a * 2.0 + 1.0, b * 3.0 + 1.0

    opt = tf_stitch.optimize(f)
    for n, m in ((4, 3), (1, 6), (5, 5)):
        a, b = tf.constant(_values(n)), tf.constant(_values(m))
        assert_close(f(a, b), opt(a, b))
    assert len(opt.kernels) == 2


def test_three_unknown_sizes_two_related_by_an_add() -> None:
    spec = tf.TensorSpec([None, 8])

    @tf.function(input_signature=[spec, spec, spec])
    def f(a: tf.Tensor, b: tf.Tensor, c: tf.Tensor) -> tuple[tf.Tensor, ...]:
        ab = tf.exp(a) + tf.tanh(b)  # a and b have one batch size
        return ab * 2.0, tf.sigmoid(a) - 1.0, tf.nn.relu(c) * 3.0 + tf.reduce_sum(c, 1, True)

    opt = tf_stitch.optimize(f)
    for n, m in ((4, 2), (3, 7)):
        a, b, c = (tf.constant(_values(k, 8)) for k in (n, n, m))
        assert_close(f(a, b, c), opt(a, b, c))
    # a's and b's values may share kernels; c's never share one with them
    for k in opt.kernels:
        readers = {i.split(":")[0] for i in k.inputs}
        assert not ({"a", "b"} & readers and "c" in readers), k


def test_dynamic_partition_outputs_have_sizes_of_their_own() -> None:
    @tf.function(input_signature=[tf.TensorSpec([None, 4]), tf.TensorSpec([None], tf.int32)])
    def f(x: tf.Tensor, parts: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        p0, p1 = tf.dynamic_partition(x, parts, 2)
        return tf.exp(p0) * 2.0 + 1.0, tf.tanh(p1) * 3.0 - 1.0

    opt = tf_stitch.optimize(f)
    x = tf.constant(_values(6, 4))
    parts = tf.constant([0, 1, 1, 0, 1, 1], tf.int32)
    assert_close(f(x, parts), opt(x, parts))
