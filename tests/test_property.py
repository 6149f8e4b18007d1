"""Property: on random graphs of the supported ops, optimizing never changes the answers.

Hypothesis builds small programs over two [batch, 2N] inputs, a [batch, T, N] sequence and
[batch] row ids (elementwise ops, broadcasts of rows and columns, row reductions with and
without keepdims, column reductions over the batch, sums over time of the sequence weighted by
a value, projections of every step of the sequence (BatchMatMulV2), transposes (of a value and
back; of the sequence, reduced over time), windows of the inputs, steps `seq[:, t]` of the
sequence, matmuls of one value or of a concatenation of two, rows of a table picked by the ids,
several fetched values, pieces of a split returned as they are), lowered conditionals (a
Switch on a boolean input, ops on both sides, a Merge), and a chain over a fifth input `c` whose
batch size is its own (fed with another size: kernels must never assume it equal to the
others'); each is optimized and compared with TensorFlow at two batch sizes, for both values of
the condition. The grouping is checked for cycles by TensorFlow
itself when it imports the graph.
Examples: TF_STITCH_PROPERTY_EXAMPLES (default 15; more for a longer search).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tensorflow as tf
from conftest import assert_close, random_inputs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from retype import retype, retype_graph_def

import tf_stitch

N = 12
T = 3
VOCAB = 7
EXAMPLES = int(os.environ.get("TF_STITCH_PROPERTY_EXAMPLES", "15"))

UNARY: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "tanh": tf.tanh,
    "sigmoid": tf.sigmoid,
    "relu": tf.nn.relu,
    "abs": tf.abs,
    "neg": tf.negative,
    "exp": lambda x: tf.exp(tf.clip_by_value(x, -20.0, 20.0)),
    "softplus": tf.nn.softplus,
    "erf": tf.math.erf,
    "square": lambda x: tf.square(x) * 0.1,
}
BINARY: dict[str, Callable[[tf.Tensor, tf.Tensor], tf.Tensor]] = {
    "add": tf.add,
    "sub": tf.subtract,
    "mul": tf.multiply,
    "max": tf.maximum,
    "min": tf.minimum,
    "div": lambda a, b: a / (tf.abs(b) + 1.0),
}
KINDS = ("unary", "unary", "binary", "binary", "reduce", "window", "matmul", "step")
KINDS += ("concat_matmul", "gather", "column", "over_time", "transpose", "batched", "other")
KINDS += ("cond", "split")
REDUCE: dict[str, Callable[..., tf.Tensor]] = {
    "sum": tf.reduce_sum,
    "mean": tf.reduce_mean,
    "max": tf.reduce_max,
}


@dataclass(frozen=True)
class Step:
    kind: str  # unary | binary | reduce | column | over_time | window | step | matmul | ...
    op: str
    args: tuple[int, ...]
    keepdims: bool = True


@st.composite
def programs(draw: st.DrawFn) -> tuple[list[Step], list[int]]:
    steps: list[Step] = []
    count = 2  # values 0 and 1 are the inputs
    for _ in range(draw(st.integers(2, 9))):
        kind = draw(st.sampled_from(KINDS))
        pick = st.integers(0, count - 1)
        if kind == "unary":
            steps.append(Step(kind, draw(st.sampled_from(sorted(UNARY))), (draw(pick),)))
        elif kind == "binary":
            steps.append(
                Step(kind, draw(st.sampled_from(sorted(BINARY))), (draw(pick), draw(pick)))
            )
        elif kind in ("reduce", "column"):
            steps.append(
                Step(
                    kind, draw(st.sampled_from(sorted(REDUCE))), (draw(pick),), draw(st.booleans())
                )
            )
        elif kind == "window":
            steps.append(Step(kind, "slice", (draw(st.integers(0, 1)), draw(st.integers(0, 5)))))
        elif kind == "step":
            steps.append(Step(kind, "step", (draw(st.integers(-T, T - 1)),)))
        elif kind == "concat_matmul":
            steps.append(Step(kind, "concat_matmul", (draw(pick), draw(pick))))
        elif kind == "gather":
            steps.append(Step(kind, "gather", ()))
        elif kind in ("cond", "split", "other"):  # ("other": a step of the chain over `c`)
            steps.append(Step(kind, draw(st.sampled_from(sorted(UNARY))), (draw(pick),)))
        elif kind in ("over_time", "batched"):
            steps.append(Step(kind, kind, (draw(pick),)))
        elif kind == "transpose":
            steps.append(
                Step(kind, draw(st.sampled_from(["there_and_back", "seq"])), (draw(pick),))
            )
        else:
            steps.append(Step(kind, "matmul", (draw(pick),)))
        count += 1
    outputs = draw(st.lists(st.integers(2, count - 1), min_size=1, max_size=3, unique=True))
    return steps, outputs


def build(steps: list[Step], outputs: list[int]) -> Callable[..., tuple[tf.Tensor, ...]]:
    """The program over inputs of width 2N: values are windows of them (width N), or width-N
    or width-1 results; every output is broadcast to width N."""
    rng = np.random.default_rng(1)
    weights = tf.constant(rng.standard_normal([N, N]).astype(np.float32) * 0.3)
    table = tf.constant(rng.standard_normal([VOCAB, N]).astype(np.float32))
    ones = tf.ones([N])

    def fn(
        a: tf.Tensor, b: tf.Tensor, seq: tf.Tensor, ids: tf.Tensor, c: tf.Tensor, p: tf.Tensor
    ) -> tuple[tf.Tensor, ...]:
        values = [a[:, :N], b[:, N:]]
        chain = [c]  # values of c's batch size
        pieces: list[tf.Tensor] = []  # returned as they are
        for s in steps:
            x = values[s.args[0]] if s.args and s.kind not in ("window", "step") else a
            if s.kind == "cond":  # a lowered tf.cond
                f, t = tf.raw_ops.Switch(data=x, pred=p)
                y = tf.raw_ops.Merge(inputs=[UNARY[s.op](t) * 2.0 + 1.0, tf.tanh(f) - 0.5])[0]
            elif s.kind == "split":
                first, rest = tf.split(UNARY[s.op](x) * ones, [4, N - 4], axis=1)
                pieces += [first, rest]
                y = tf.concat([rest, first * 2.0], axis=1)
            elif s.kind == "other":
                chain.append(UNARY[s.op](chain[-1]) * 1.5 + chain[s.args[0] % len(chain)])
                y = x * 0.5
            elif s.kind == "unary":
                y = UNARY[s.op](x)
            elif s.kind == "binary":
                y = BINARY[s.op](x, values[s.args[1]])
            elif s.kind == "reduce":
                r = REDUCE[s.op](x, -1, keepdims=s.keepdims)
                y = r if s.keepdims else tf.expand_dims(r, -1)
            elif s.kind == "column":
                r = REDUCE[s.op](x, 0, keepdims=s.keepdims)
                y = x - (r if s.keepdims else tf.expand_dims(r, 0))  # centred, as batch norm
            elif s.kind == "over_time":
                y = tf.reduce_sum(seq * tf.expand_dims(x, 1), 1)
            elif s.kind == "batched":  # a projection of every step, then over the steps
                z = tf.tanh(tf.linalg.matmul(seq, weights) + tf.expand_dims(x, 1))
                y = tf.reduce_max(tf.reduce_sum(z, -1, keepdims=True), 1)
            elif s.kind == "transpose" and s.op == "seq":
                y = tf.reduce_max(tf.transpose(seq, [0, 2, 1]) * tf.expand_dims(x, -1), -1)
            elif s.kind == "transpose":
                y = tf.transpose(tf.tanh(tf.transpose(x)) * 1.5)
            elif s.kind == "window":
                source, start = (a, b)[s.args[0]], s.args[1]
                y = source[:, start : start + N]
            elif s.kind == "step":
                y = seq[:, s.args[0]]
            elif s.kind == "concat_matmul":
                z = values[s.args[1]]
                width = int(x.shape[-1]) + int(z.shape[-1])
                w = rng.standard_normal([width, N]).astype(np.float32) * 0.3
                y = tf.matmul(tf.concat([x, z], axis=1), tf.constant(w))
            elif s.kind == "gather":
                y = tf.gather(table, ids)
            else:
                y = tf.matmul(x * ones, weights)
            values.append(y)
        return (*(values[i] * ones for i in outputs), chain[-1] * ones, *pieces)

    return fn


# The random-graph property tests' settings (tests/test_int_property.py's too).
PROPERTY_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    print_blob=True,  # a failure in CI says how to replay it (`@reproduce_failure`)
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@PROPERTY_SETTINGS
@given(programs(), st.sampled_from(["float32", "float64", "float16", "bfloat16"]))
def test_optimized_random_graphs_match_tensorflow(
    program: tuple[list[Step], list[int]], dtype: str
) -> None:
    steps, outputs = program
    sig = [
        tf.TensorSpec([None, 2 * N]),
        tf.TensorSpec([None, 2 * N]),
        tf.TensorSpec([None, T, N]),
        tf.TensorSpec([None], tf.int32),
        tf.TensorSpec([None, N]),
        tf.TensorSpec([], tf.bool),
    ]
    if dtype != "float32":
        _check_in_dtype(build(steps, outputs), sig, tf.as_dtype(dtype))
        return
    original = tf.function(build(steps, outputs), input_signature=sig)
    optimized = tf_stitch.optimize(original)
    for batch, seed in ((1, 0), (4, 1)):
        xs = random_inputs(sig[:3], batch=batch, seed=seed)
        ids = tf.constant(np.random.default_rng(seed).integers(0, VOCAB, [batch]), tf.int32)
        (c,) = random_inputs(sig[4:5], batch=batch + 2, seed=seed)
        for p in (tf.constant(True), tf.constant(False)):
            want, got = original(*xs, ids, c, p), optimized(*xs, ids, c, p)
            assert_close(want, got, rtol=2e-5, atol=2e-5)


def _inputs(sig: list[tf.TensorSpec], batch: int, seed: int) -> list[tf.Tensor]:
    xs = random_inputs(sig[:3], batch=batch, seed=seed)
    ids = tf.constant(np.random.default_rng(seed).integers(0, VOCAB, [batch]), tf.int32)
    (c,) = random_inputs(sig[4:5], batch=batch + 2, seed=seed)
    return [*xs, ids, c]


def _check_in_dtype(fn: Callable[..., object], sig: list[tf.TensorSpec], dtype: tf.DType) -> None:
    """The program's float32 tensors made `dtype` (tests/retype.py). float64: TensorFlow's own
    run, within 1e-9. 16-bit floats: kernels compute in float32 and round their outputs, so the
    reference is TensorFlow's float32 run of the same graph (its constants rounded to `dtype`)
    rounded once; values that cross kernels are rounded there too: within 1e-2 (float16), 6e-2
    (bfloat16)."""
    retyped = retype(fn, sig, dtype)
    optimized = tf_stitch.optimize(retyped.graph_def, outputs=retyped.outputs)
    wide = retype_graph_def(retyped.graph_def, dtype, tf.float32)
    tol = {tf.float64: 1e-9, tf.float16: 1e-2, tf.bfloat16: 6e-2}[dtype]
    for batch, seed in ((1, 0), (4, 1)):
        xs = _inputs(sig, batch, seed)
        for p in (tf.constant(True), tf.constant(False)):
            typed = [tf.cast(x, d) for x, d in zip([*xs, p], retyped.dtypes, strict=True)]
            got = retyped.run(optimized, typed)
            if dtype == tf.float64:
                want = retyped.run(retyped.graph_def, typed)
            else:
                floats = [tf.cast(x, tf.float32) if x.dtype == dtype else x for x in typed]
                want = [tf.cast(w, dtype).numpy() for w in retyped.run(wide, floats)]
            for w, g in zip(want, got, strict=True):
                assert w.dtype == g.dtype and w.shape == g.shape
                w64, g64 = w.astype(np.float64), g.astype(np.float64)
                np.testing.assert_allclose(g64, w64, rtol=tol, atol=tol, equal_nan=True)
