"""Differential fuzzing of the optimizer: random graphs of the supported ops, optimized, must give
TensorFlow's outputs: NaN in the same places, the same infinities, float32 tolerance elsewhere;
and the optimized graph must import into TensorFlow (so it is acyclic and well formed).

Programs draw from unary and binary elementwise ops (raw division, exp, log, reciprocal: they
make infinities and NaN of their own), reductions (sum, mean, max, min) over random axes with or
without keepdims, transposes, small matmuls, shared subexpressions, control dependencies, and
fetches of intermediate values; inputs are [batch, R, C] with R and C from sizes that include 1
and odd numbers, seeded with NaN, infinities, denormals, signed zeros and values of 1e30.

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
from hypothesis import given
from hypothesis import strategies as st

import tf_stitch

pytestmark = [pytest.mark.fuzz, pytest.mark.usefixtures("kernel_cache")]

SIZES = (1, 2, 3, 5, 7, 16, 17)
SPECIALS = (np.nan, np.inf, -np.inf, 1e-40, -0.0, 1e30, -1e30)

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


@dataclass(frozen=True)
class Step:
    kind: str  # unary | binary | reduce | transpose | matmul
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
            st.sampled_from(("unary", "unary", "binary", "binary", "reduce", "transpose", "matmul"))
        )
        tables = {"unary": UNARY, "binary": BINARY, "reduce": REDUCE}
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
                st.tuples(st.integers(0, 1), st.integers(0, 10_000), st.integers(0, 6)),
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


def assert_same(want: np.ndarray, got: np.ndarray) -> None:
    assert want.shape == got.shape and want.dtype == got.dtype
    nan_w, nan_g = np.isnan(want), np.isnan(got)
    assert np.array_equal(nan_w, nan_g), f"NaN at {np.argwhere(nan_w != nan_g)[:5].tolist()}"
    inf = np.isinf(want) | np.isinf(got)
    assert np.array_equal(want[inf], got[inf]), "infinities differ"
    finite = ~(nan_w | inf)
    scale = max(1.0, float(np.max(np.abs(want[finite]), initial=0.0)))
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-5 * scale)


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
                assert_same(w.numpy(), g.numpy())


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
