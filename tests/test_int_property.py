"""Property: random integer programs, in a random integer dtype, give TensorFlow's exact answers
once optimized.

Hypothesis builds chains over two [batch, N] integer inputs of the drawn dtype (full-range
random values, with the dtype's extremes): wrapping arithmetic, bitwise ops and shifts by
values, divisions and modulos (floor and truncating) by constants (with -1 where signed),
reductions over rows and over the batch (sums and products wrapping, means summed in 64 bits),
comparisons feeding selects, casts to another integer dtype and back, a detour through float32
and back to int32 (truncation; NaN and values out of range give the minimum), broadcasts of a
row or a column, transposes; several values fetched. Compared bit for bit at two batch sizes.
Examples: TF_STITCH_PROPERTY_EXAMPLES (default 15).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tensorflow as tf
from hypothesis import given, reject
from hypothesis import strategies as st
from test_int_numerics import SIGNED, UNSIGNED, values
from test_property import BINARY as FLOAT_BINARY
from test_property import PROPERTY_SETTINGS

import tf_stitch

N = 10
BINARY: dict[str, Callable[[tf.Tensor, tf.Tensor], tf.Tensor]] = {
    **{op: fn for op, fn in FLOAT_BINARY.items() if op != "div"},  # add, sub, mul, max, min
    "and": tf.bitwise.bitwise_and,
    "or": tf.bitwise.bitwise_or,
    "xor": tf.bitwise.bitwise_xor,
    "lshift": tf.bitwise.left_shift,
    "rshift": tf.bitwise.right_shift,
    "select": lambda a, b: tf.where(a > b, a, b - a),
}
DIVISIONS: dict[str, Callable[[tf.Tensor, tf.Tensor], tf.Tensor]] = {
    "floordiv": tf.math.floordiv,
    "floormod": tf.math.floormod,
    "truncatediv": tf.truncatediv,
    "truncatemod": tf.truncatemod,
}
REDUCE = {
    "sum": tf.reduce_sum,
    "max": tf.reduce_max,
    "min": tf.reduce_min,
    "mean": tf.reduce_mean,
    "prod": tf.reduce_prod,
}
KINDS = ("binary", "binary", "binary", "unary", "divide", "cast", "float", "row", "transpose")
KINDS += ("reduce", "column")
NONZERO = [d for d in range(-9, 10) if d]


@dataclass(frozen=True)
class Step:
    kind: str
    op: str
    args: tuple[int, ...]


@st.composite
def programs(draw: st.DrawFn) -> tuple[tf.DType, list[Step], list[int]]:
    dtype = draw(st.sampled_from(SIGNED + UNSIGNED))
    signed = not dtype.is_unsigned
    steps = []
    for i in range(draw(st.integers(2, 7))):
        kind = draw(st.sampled_from(KINDS))
        a, b = draw(st.integers(0, i + 1)), draw(st.integers(0, i + 1))
        op = {
            "binary": st.sampled_from(sorted(BINARY)),
            "unary": st.sampled_from(["invert", "square", *(["neg", "abs"] * signed)]),
            "divide": st.sampled_from(sorted(DIVISIONS)),
            "cast": st.sampled_from([d.name for d in SIGNED + UNSIGNED]),
            "reduce": st.sampled_from(sorted(REDUCE)),
            "column": st.sampled_from(sorted(REDUCE)),
        }.get(kind, st.just(""))
        divisor = draw(st.sampled_from(NONZERO))  # (a filter made Hypothesis give up often)
        steps.append(Step(kind, draw(op), (a, b, divisor)))
    outputs = draw(st.lists(st.integers(0, len(steps) + 1), min_size=1, max_size=3))
    return dtype, steps, outputs


def build(dtype: tf.DType, steps: list[Step], outputs: list[int]) -> Callable[..., object]:
    def fn(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, ...]:
        vals = [x, y]
        for s in steps:
            a, b = vals[s.args[0]], vals[s.args[1]]
            if s.kind == "binary":
                v = BINARY[s.op](a, b)
            elif s.kind == "unary":
                unary = {"neg": tf.negative, "abs": tf.abs, "square": tf.square}
                v = unary.get(s.op, tf.bitwise.invert)(a)
            elif s.kind == "divide":
                divisor = abs(s.args[2]) if dtype.is_unsigned else s.args[2]
                op = (
                    s.op
                    if dtype in (tf.int32, tf.int64)
                    else s.op.replace("truncatemod", "floormod")
                )
                v = DIVISIONS[op](a, tf.constant(divisor, dtype))  # (TruncateMod: 32, 64 bits)
            elif s.kind == "cast":
                v = tf.cast(tf.cast(a, tf.as_dtype(s.op)) + tf.cast(1, s.op), dtype)
            elif s.kind == "float":  # float32 and back through int32 (exact on every path)
                v = tf.cast(tf.cast(tf.cast(a, tf.float32) * 0.75, tf.int32), dtype)
            elif s.kind == "reduce":  # over rows, broadcast back
                v = REDUCE[s.op](a, -1, keepdims=True) - b
            elif s.kind == "column":  # over the batch, broadcast back
                v = a - REDUCE[s.op](b, 0)
            elif s.kind == "row":  # a row and a column broadcast
                v = a[:1] - b[:, :1]
            else:
                v = tf.transpose(tf.transpose(a) + tf.transpose(b))
            vals.append(v)
        return tuple(vals[i] + tf.ones_like(vals[i]) for i in outputs)

    return fn


@PROPERTY_SETTINGS
@given(programs())
def test_optimized_random_integer_graphs_match_tensorflow_exactly(
    program: tuple[tf.DType, list[Step], list[int]],
) -> None:
    dtype, steps, outputs = program
    sig = [tf.TensorSpec([None, N], dtype)] * 2
    original = tf.function(build(dtype, steps, outputs), input_signature=sig)
    inputs = [
        [values(dtype, (batch, N), seed), values(dtype, (batch, N), seed + 7)]
        for batch, seed in ((1, 0), (5, 1))
    ]
    try:
        wanted = [[t.numpy() for t in original(*xs)] for xs in inputs]
    except tf.errors.InvalidArgumentError as e:
        # TensorFlow cannot run some programs itself: its Grappler rewrites Square(a - b) into
        # SquaredDifference, which has no kernel for 8- and 16-bit or unsigned integers
        # (found by this test). There is nothing to compare with.
        if "is not in the list of allowed values" not in str(e):
            raise
        reject()
    optimized = tf_stitch.optimize(original)
    assert any(n.op == "StitchedKernel" for n in optimized.graph_def.node)
    for xs, want in zip(inputs, wanted, strict=True):
        for w, got in zip(want, optimized(*xs), strict=True):
            np.testing.assert_array_equal(got.numpy(), w)
