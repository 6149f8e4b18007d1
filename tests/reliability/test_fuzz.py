"""Differential fuzzing of the optimizer: random graphs of the supported ops, optimized, must give
TensorFlow's outputs: NaN in the same places, the same infinities, float32 tolerance elsewhere;
and the optimized graph must import into TensorFlow (so it is acyclic and well formed).

Programs draw from unary and binary elementwise ops (raw division, exp, log, reciprocal: they
make infinities and NaN of their own), reductions (sum, mean, max, min) over random axes with or
without keepdims, softmax, log-softmax and layer-norm chains (of a centred, scaled value, as
attention scores are), transposes, small matmuls, shared subexpressions, control dependencies,
and fetches of intermediate values; inputs are [batch, R, C] with R and C from sizes that
include 1 and odd numbers, seeded with NaN, infinities, denormals, signed zeros, values of 1e30
and values near the float32 limits (±3e38, ±FLT_MAX).

The default run tries the `ci` profile's examples (tests/conftest.py); `pytest -m fuzz
--hypothesis-profile=long` searches longer. A failing example found by a search is kept below
in REGRESSIONS and replayed by every run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_same_specials
from hypothesis import given
from hypothesis import strategies as st

import tf_stitch

pytestmark = [pytest.mark.fuzz, pytest.mark.usefixtures("kernel_cache")]

SIZES = (1, 2, 3, 5, 7, 16, 17)
FLT_MAX = float(np.finfo(np.float32).max)
SPECIALS = (
    np.nan,
    np.inf,
    -np.inf,
    1e-40,
    -0.0,
    1e30,
    -1e30,
    3e38,
    -3e38,
    FLT_MAX,
    -FLT_MAX,
    1e-45,
)

UNARY: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "tanh": tf.tanh,
    "sigmoid": tf.sigmoid,
    "relu": tf.nn.relu,
    "abs": tf.abs,
    "neg": tf.negative,
    "exp": tf.exp,
    "log_abs": lambda x: tf.math.log(tf.abs(x)),
    "sqrt_abs": lambda x: tf.sqrt(tf.abs(x)),
    "reciprocal": tf.math.reciprocal,
    "square": tf.square,
    "floor": tf.floor,
}
BINARY: dict[str, Callable[[tf.Tensor, tf.Tensor], tf.Tensor]] = {
    "add": tf.add,
    "sub": tf.subtract,
    "mul": tf.multiply,
    "div": tf.divide,
    "max": tf.maximum,
    "min": tf.minimum,
    "sqdiff": tf.math.squared_difference,
}
REDUCE: dict[str, Callable[..., tf.Tensor]] = {
    "sum": tf.reduce_sum,
    "mean": tf.reduce_mean,
    "max": tf.reduce_max,
    "min": tf.reduce_min,
}
AXES = ((1,), (2,), (-1,), (1, 2))


def _centred(x: tf.Tensor) -> tf.Tensor:
    """A centred, scaled row, as attention scores are."""
    return (x - tf.reduce_mean(x, -1, keepdims=True)) * 3.0


def _softmax(x: tf.Tensor) -> tf.Tensor:
    # (written out: TensorFlow's own Softmax kernel differs by library on rows holding NaN)
    e = tf.exp(_centred(x) - tf.reduce_max(_centred(x), -1, keepdims=True))
    return e / tf.reduce_sum(e, -1, keepdims=True)


def _log_softmax(x: tf.Tensor) -> tf.Tensor:
    shifted = _centred(x) - tf.reduce_max(_centred(x), -1, keepdims=True)
    return shifted - tf.math.log(tf.reduce_sum(tf.exp(shifted), -1, keepdims=True))


def _layer_norm(x: tf.Tensor) -> tf.Tensor:
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.square(x - m), -1, keepdims=True)
    return (x - m) * tf.math.rsqrt(v + 1e-5) * 1.5 + 0.25


COMPOSITE: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "softmax": _softmax,
    "log_softmax": _log_softmax,
    "layer_norm": _layer_norm,
}


@dataclass(frozen=True)
class Step:
    kind: str  # unary | binary | reduce | composite | transpose | matmul
    op: str
    a: int  # operand indices into the values computed so far (taken modulo their number)
    b: int
    axes: tuple[int, ...] = (2,)
    keepdims: bool = True
    after: int = -1  # a value this step has a control dependency on (-1: none)


@dataclass(frozen=True)
class Program:
    rows: int
    cols: int
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]
    specials: tuple[tuple[int, int, int], ...]  # (input, flat position seed, special index)


@st.composite
def programs(draw: st.DrawFn) -> Program:
    n = draw(st.integers(2, 9))
    steps = []
    for _ in range(n):
        kind = draw(
            st.sampled_from(
                ("unary", "unary", "binary", "binary", "reduce", "composite", "transpose", "matmul")
            )
        )
        tables = {"unary": UNARY, "binary": BINARY, "reduce": REDUCE, "composite": COMPOSITE}
        op = draw(st.sampled_from(sorted(tables[kind]))) if kind in tables else kind
        steps.append(
            Step(
                kind,
                op,
                draw(st.integers(0, 30)),
                draw(st.integers(0, 30)),
                draw(st.sampled_from(AXES)),
                draw(st.booleans()),
                draw(st.sampled_from([-1, -1, -1, draw(st.integers(0, 30))])),
            )
        )
    outputs = tuple(draw(st.lists(st.integers(0, 30), min_size=0, max_size=2)))
    specials = tuple(
        draw(
            st.lists(
                st.tuples(
                    st.integers(0, 1), st.integers(0, 10_000), st.integers(0, len(SPECIALS) - 1)
                ),
                max_size=6,
            )
        )
    )
    return Program(
        draw(st.sampled_from(SIZES)), draw(st.sampled_from(SIZES)), tuple(steps), outputs, specials
    )


def build(p: Program) -> Callable[[tf.Tensor, tf.Tensor], tuple[tf.Tensor, ...]]:
    weight = tf.constant(
        np.random.default_rng(p.cols).standard_normal((p.cols, p.cols)).astype(np.float32) * 0.3
    )

    def fn(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, ...]:
        values = [x, y]  # every value broadcasts against [batch, rows, cols]
        for s in p.steps:
            a, b = values[s.a % len(values)], values[s.b % len(values)]
            deps = [values[s.after % len(values)]] if s.after >= 0 else []
            with tf.control_dependencies(deps):
                if s.kind == "unary":
                    v = UNARY[s.op](a)
                elif s.kind == "binary":
                    v = BINARY[s.op](a, b)
                elif s.kind == "composite":
                    v = COMPOSITE[s.op](a)
                elif s.kind == "reduce":
                    v = REDUCE[s.op](a, axis=list(s.axes), keepdims=s.keepdims)
                    if not s.keepdims:  # back to a broadcastable rank, as graphs do
                        for axis in sorted(ax % 3 for ax in s.axes):
                            v = tf.expand_dims(v, axis)
                elif s.kind == "transpose":
                    v = tf.transpose(tf.tanh(tf.transpose(a, [0, 2, 1])) + 1.0, [0, 2, 1])
                else:
                    full = a * tf.ones_like(x)  # [batch, rows, cols]
                    v = tf.matmul(full, weight)
            values.append(v)
        last = values[-1] * tf.ones_like(x)
        return (last, *(values[2 + i % (len(values) - 2)] for i in p.outputs))

    return fn


def inputs(p: Program, batch: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal((batch, p.rows, p.cols)).astype(np.float32) for _ in range(2)]
    for which, position, special in p.specials:
        xs[which].reshape(-1)[position % xs[which].size] = SPECIALS[special]
    return xs


def check(p: Program) -> None:
    sig = [tf.TensorSpec([None, p.rows, p.cols], tf.float32)] * 2
    original = tf.function(build(p), input_signature=sig)
    optimized = tf_stitch.optimize(original)
    with tf.Graph().as_default():  # importable, hence acyclic and well formed
        tf.graph_util.import_graph_def(optimized.graph_def, name="")
    for batch, seed in ((1, 0), (3, 1)):
        xs = inputs(p, batch, seed)
        with np.errstate(all="ignore"):
            for w, g in zip(original(*xs), optimized(*xs), strict=True):
                assert_same_specials(w.numpy(), g.numpy())


@given(programs())
def test_optimized_random_graphs_give_tensorflows_answers(program: Program) -> None:
    check(program)


# Programs replayed by every run: a softmax-like chain over a single row with NaN, an infinity
# and a denormal in its inputs, and (appended here) any failing example a search finds.
REGRESSIONS: list[Program] = [
    Program(
        rows=1,
        cols=17,
        steps=(
            Step("reduce", "max", 0, 0, (1, 2), False),
            Step("binary", "sub", 0, 2),
            Step("unary", "exp", 3, 3),
            Step("reduce", "sum", 4, 4, (-1,), True, after=2),
            Step("binary", "div", 4, 5),
        ),
        outputs=(1, 3),
        specials=((0, 3, 0), (1, 5, 1), (0, 7, 3)),
    ),
]


@pytest.mark.parametrize("program", REGRESSIONS)
def test_kept_examples(program: Program) -> None:
    check(program)
