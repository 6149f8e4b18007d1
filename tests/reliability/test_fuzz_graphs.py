"""Differential fuzzing on frozen TF1-style GraphDefs: lowered conditionals, multi-output ops
fetched by index, and inputs whose unknown sizes are unrelated.

Each program is built in a `tf.compat.v1` graph over three [?, C] inputs: `x` and `z`, whose
batch sizes the graph relates (an add of the two), and `y`, whose batch size is its own (fed
with another size). Steps draw from elementwise ops (within one family of batch sizes), row
reductions, bias adds, Split/SplitV and Unpack (their pieces fetched directly as `name:i`), and
lowered conditionals: a Switch on a fed predicate, ops on both branches (one or two levels
deep), a Merge. Optimized with the fetches named as tensors, the graph must give TensorFlow's
outputs for both values of the predicate and several pairs of batch sizes.

The default run tries the `ci` profile's examples; `pytest -m fuzz --hypothesis-profile=long
tests/reliability/test_fuzz_graphs.py` searches 400.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close
from graph_helpers import run_graph_def
from hypothesis import given
from hypothesis import strategies as st

import tf_stitch

pytestmark = [pytest.mark.fuzz, pytest.mark.usefixtures("kernel_cache")]

C = 6
UNARY: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "tanh": tf.tanh,
    "sigmoid": tf.sigmoid,
    "relu": tf.nn.relu,
    "neg": tf.negative,
    "exp": lambda v: tf.exp(tf.clip_by_value(v, -20.0, 20.0)),
    "square": lambda v: tf.square(v) * 0.1,
}
BINARY: dict[str, Callable[[tf.Tensor, tf.Tensor], tf.Tensor]] = {
    "add": tf.add,
    "sub": tf.subtract,
    "mul": tf.multiply,
    "max": tf.maximum,
}
KINDS = ("unary", "binary", "binary", "bias", "reduce", "split", "unstack", "cond", "cond")
BATCHES = ((1, 3), (4, 2), (2, 2))  # (size of x and z, size of y)


@dataclass(frozen=True)
class Step:
    kind: str
    op: str
    a: int  # operands: indices into the values so far (modulo their number)
    b: int
    depth: int = 1  # a conditional's branches: ops per branch


@dataclass(frozen=True)
class Program:
    steps: tuple[Step, ...]
    fetches: tuple[int, ...]  # indices into the fetchable tensors (modulo their number)


@st.composite
def programs(draw: st.DrawFn) -> Program:
    steps = []
    for _ in range(draw(st.integers(2, 8))):
        kind = draw(st.sampled_from(KINDS))
        table = {"unary": UNARY, "binary": BINARY}.get(kind, UNARY)
        op = draw(st.sampled_from(sorted(table)))
        steps.append(
            Step(
                kind,
                op,
                draw(st.integers(0, 20)),
                draw(st.integers(0, 20)),
                draw(st.sampled_from((1, 2))),
            )
        )
    fetches = tuple(draw(st.lists(st.integers(0, 40), min_size=1, max_size=4)))
    return Program(tuple(steps), fetches)


def build(p: Program) -> tuple[tf.compat.v1.GraphDef, list[str]]:
    """The program's GraphDef and the tensor names it fetches."""
    rng = np.random.default_rng(len(p.steps))
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, C], name="x")
        y = tf.compat.v1.placeholder(tf.float32, [None, C], name="y")
        z = tf.compat.v1.placeholder(tf.float32, [None, C], name="z")
        pred = tf.compat.v1.placeholder_with_default(True, [], name="p")
        values: list[tuple[tf.Tensor, str]] = [(x + z, "x"), (tf.identity(y), "y"), (z, "x")]
        fetchable: list[tf.Tensor] = []
        for i, s in enumerate(p.steps):
            v, family = values[s.a % len(values)]
            peers = [t for t, f in values if f == family]
            w = peers[s.b % len(peers)]
            if s.kind == "unary":
                out = UNARY[s.op](v)
            elif s.kind == "binary":
                out = BINARY[s.op](v, w)
            elif s.kind == "bias":
                out = tf.nn.bias_add(v, tf.constant(rng.standard_normal(C).astype(np.float32)))
            elif s.kind == "reduce":
                out = UNARY[s.op](v - tf.reduce_max(v, 1, keepdims=True))
            elif s.kind == "split":
                pieces = tf.split(UNARY[s.op](v), [2, C - 2], 1, name=f"split{i}")
                fetchable.extend(pieces)
                out = tf.concat([pieces[1], pieces[0] * 2.0], 1)
            elif s.kind == "unstack":
                rows = tf.unstack(tf.reshape(UNARY[s.op](v), [-1, 2, C // 2]), axis=1, name=f"u{i}")
                fetchable.extend(rows)
                out = tf.concat([rows[1] + 1.0, rows[0]], 1)
            else:
                out = _cond(v, w, pred, s)
            values.append((out, family))
            fetchable.append(out)
        fetches = [fetchable[k % len(fetchable)].name for k in p.fetches]
    return g.as_graph_def(), sorted(set(fetches), key=fetches.index)


def _cond(v: tf.Tensor, w: tf.Tensor, pred: tf.Tensor, s: Step) -> tf.Tensor:
    """A lowered tf.cond: a Switch of each operand, ops on both sides, a Merge."""
    vf, vt = tf.raw_ops.Switch(data=v, pred=pred)
    wf, wt = tf.raw_ops.Switch(data=w, pred=pred)
    t, f = vt * 2.0 + wt, tf.exp(tf.clip_by_value(vf, -20.0, 20.0)) - wf
    for _ in range(s.depth - 1):
        t, f = UNARY[s.op](t), tf.tanh(f) * 3.0
    merged, _ = tf.raw_ops.Merge(inputs=[t, f])
    return merged


def check(p: Program) -> None:
    gd, fetches = build(p)
    opt = tf_stitch.optimize(gd, inputs=["x", "y", "z", "p"], outputs=fetches)
    for (n, m), pred in zip(BATCHES, (True, False, True), strict=True):
        rng = np.random.default_rng(n * 10 + m)
        feeds = {
            "x:0": rng.standard_normal((n, C)).astype(np.float32),
            "y:0": rng.standard_normal((m, C)).astype(np.float32),
            "z:0": rng.standard_normal((n, C)).astype(np.float32),
            "p:0": pred,
        }
        for pr in (pred, not pred):
            feeds["p:0"] = pr
            want, got = run_graph_def(gd, feeds, fetches), run_graph_def(opt, feeds, fetches)
            assert_close(want, got, rtol=2e-5, atol=2e-5)


@given(programs())
def test_optimized_tf1_graphs_give_tensorflows_answers(program: Program) -> None:
    check(program)


# Replayed by every run: both branches of a conditional over values of unrelated sizes, with
# pieces of a split fetched by index.
REGRESSIONS = [
    Program(
        steps=(
            Step("cond", "tanh", 0, 1, 2),
            Step("cond", "exp", 1, 1, 1),
            Step("split", "sigmoid", 3, 0),
            Step("unstack", "relu", 4, 0),
        ),
        fetches=(0, 1, 2, 3, 4, 5, 6),
    )
]


@pytest.mark.parametrize("program", REGRESSIONS)
def test_kept_examples(program: Program) -> None:
    check(program)
