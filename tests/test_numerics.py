"""Optimized graphs give the original's answers, with the expected kernels.

Each case is a function, its input signature, how many StitchedKernel nodes the optimized graph
must hold and which TensorFlow compute ops must remain (Const, Placeholder, Identity, NoOp and
Reshape-like views are not counted). Values are compared with the unoptimized TensorFlow function
on random inputs, with the batch dimension left unknown and varied between calls.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close, random_inputs

import tf_stitch

_NOT_COUNTED = {"Const", "Placeholder", "Identity", "NoOp", "Reshape", "ExpandDims", "Squeeze"}
F = tf.float32


def spec(*shape: int | None, dtype: tf.DType = F) -> tf.TensorSpec:
    return tf.TensorSpec(shape, dtype)


def const(*shape: int, seed: int = 7) -> tf.Tensor:
    return tf.constant(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


@dataclass
class Case:
    name: str
    fn: Callable[..., Any]
    signature: list[tf.TensorSpec]
    kernels: int
    remaining: dict[str, int] = field(default_factory=dict)
    positive: bool = False  # feed |x| + 0.5 (for log, sqrt, pow)
    tol: dict[str, float] = field(default_factory=dict)


def layer_norm(x: tf.Tensor, g: Any, b: Any, eps: float = 1e-5) -> tf.Tensor:
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.math.squared_difference(x, m), -1, keepdims=True)
    return (x - m) * tf.math.rsqrt(v + eps) * g + b


G768, B768 = const(768, seed=1), const(768, seed=2)
G64, B64 = const(64, seed=3), const(64, seed=4)


def _ln_gelu(x: tf.Tensor) -> tf.Tensor:
    return tf.nn.gelu(layer_norm(x, G768, B768), approximate=False)


def _rms_norm(x: tf.Tensor) -> tf.Tensor:
    return x * tf.math.rsqrt(tf.reduce_mean(tf.square(x), -1, keepdims=True) + 1e-6) * G64


def _masked_softmax(x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    return tf.nn.softmax(x * 0.125 + (1.0 - mask) * -10000.0)


def _two_outputs(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    e = tf.exp(x * 0.5)
    return e, tf.math.log1p(e) * 2.0


def _norm_with_statistics(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Per-row outputs next to per-element ones: the mean without keepdims, the variance with."""
    m = tf.reduce_mean(x, -1)
    v = tf.reduce_mean(tf.square(x - m[:, None]), -1, keepdims=True)
    return (x - m[:, None]) * tf.math.rsqrt(v + 1e-3), m, v


def _reductions(x: tf.Tensor) -> tf.Tensor:
    s = tf.reduce_sum(x, -1, keepdims=True)
    mx = tf.reduce_max(x, -1, keepdims=True)
    mn = tf.reduce_min(x, -1, keepdims=True)
    p = tf.reduce_prod(tf.tanh(x) * 0.5 + 1.0, -1, keepdims=True)
    return (x - mn) / (mx - mn + 1e-3) + s * 0.01 + p


def _no_keepdims(x: tf.Tensor) -> tf.Tensor:
    m = tf.reduce_mean(x, -1)
    return x - tf.expand_dims(m, -1) + tf.reshape(tf.reduce_max(x, -1), [-1, 1])


def _batch_norm(x: tf.Tensor) -> tf.Tensor:
    c = 16
    y, _, _ = tf.compat.v1.nn.fused_batch_norm(
        x,
        const(c, seed=1),
        const(c, seed=2),
        mean=const(c, seed=3),
        variance=tf.abs(const(c, seed=4)) + 0.5,
        epsilon=1e-3,
        is_training=False,
    )
    return tf.nn.relu(y)


def _dense_ln_block() -> tuple[Callable[..., Any], list[tf.TensorSpec]]:
    import keras

    keras.utils.set_random_seed(0)
    inp = keras.Input((16, 64))
    h = keras.layers.Dense(64, activation="relu")(inp)
    out = keras.layers.LayerNormalization()(h + inp)
    model = keras.Model(inp, out)
    return (lambda x: model(x, training=False)), [spec(None, 16, 64)]


def _encoder() -> tuple[Callable[..., Any], list[tf.TensorSpec]]:
    import keras

    keras.utils.set_random_seed(0)
    inp = keras.Input((16, 64))
    a = keras.layers.MultiHeadAttention(4, 16)(inp, inp)
    h = keras.layers.LayerNormalization(epsilon=1e-12)(inp + a)
    f = keras.layers.Dense(128, activation="gelu")(h)
    f = keras.layers.Dense(64)(f)
    out = keras.layers.LayerNormalization(epsilon=1e-12)(h + f)
    model = keras.Model(inp, out)
    return (lambda x: model(x, training=False)), [spec(None, 16, 64)]


CASES = [
    Case("layer_norm", lambda x: layer_norm(x, G64, B64), [spec(None, 64)], 1),
    Case("layer_norm_gelu", _ln_gelu, [spec(None, 768)], 1),
    Case("rms_norm", _rms_norm, [spec(None, 64)], 1),
    Case("softmax", tf.nn.softmax, [spec(None, 128)], 1),
    Case("log_softmax", tf.nn.log_softmax, [spec(None, 5, 33)], 1),
    Case("masked_softmax", _masked_softmax, [spec(None, 2, 8, 8), spec(None, 1, 1, 8)], 1),
    Case("gelu_exact", lambda x: tf.nn.gelu(x, approximate=False), [spec(None, 96)], 1),
    Case("gelu_tanh", lambda x: tf.nn.gelu(x, approximate=True), [spec(None, 96)], 1),
    Case("bias_relu", lambda x: tf.nn.relu(tf.nn.bias_add(x, B64)), [spec(None, 64)], 1),
    Case("bias_relu6_scale", lambda x: tf.nn.relu6(x + B64) * 0.5, [spec(None, 3, 64)], 1),
    Case("swish", lambda x: x * tf.sigmoid(x), [spec(None, 40)], 1),
    Case(
        "activations",
        lambda x: tf.nn.elu(x) + tf.nn.selu(x) * tf.nn.softplus(x) - tf.nn.leaky_relu(x, 0.3),
        [spec(None, 17)],
        1,
    ),
    Case(
        "rank1_broadcast", lambda x, v, w: x * v + w, [spec(None, 4, 16), spec(16), spec(4, 1)], 1
    ),
    Case(
        "keepdims_broadcast",
        lambda x: tf.exp(x - tf.reduce_max(x, -1, keepdims=True)) * 3.0,
        [spec(None, 7, 9)],
        1,
    ),
    Case("no_keepdims_reduce", _no_keepdims, [spec(None, 12)], 1),
    Case(
        "reduce_two_axes",
        lambda x: x - tf.reduce_mean(x, [-2, -1], keepdims=True),
        [spec(None, 4, 6, 5)],
        1,
    ),
    Case("reductions", _reductions, [spec(None, 19)], 1),
    Case(  # integer counts converted as they are loaded
        "int_counts",
        lambda x: x / tf.cast(tf.shape(x)[0], F) + tf.cast(tf.size(x, tf.int64), F) * 1e-3,
        [spec(None, 11)],
        1,
        remaining={"Shape": 1, "Size": 1, "Slice": 1},  # (integers on the host)
    ),
    Case(  # a loss: the total divided by a count the kernel converts (one value per row too)
        "mean_loss",
        lambda x: tf.math.divide_no_nan(tf.reduce_sum(x), tf.cast(tf.size(x), F) * 2.0),
        [spec(None, 11)],
        1,
        remaining={"Size": 1},
    ),
    Case(  # 0 where the denominator is +-0, whatever the numerator (NaN, inf)
        "div_no_nan",
        lambda x, y: tf.math.divide_no_nan(x, tf.nn.relu(y)) * 2.0,
        [spec(None, 13), spec(None, 13)],
        1,
    ),
    Case("two_outputs", _two_outputs, [spec(None, 31)], 1),
    Case("per_row_outputs", _norm_with_statistics, [spec(None, 24)], 1),
    Case(
        "where_compare",
        lambda x: tf.where(x > 0.0, x, 0.1 * x) + tf.cast(x < -1.0, F),
        [spec(None, 10)],
        1,
    ),
    Case(
        "mask_cast",
        lambda x, m: tf.nn.relu(x) * tf.cast(m, F),
        [spec(None, 8), spec(None, 8, dtype=tf.bool)],
        1,
    ),
    Case(
        "unary_chain",
        lambda x: (
            tf.sqrt(x) + tf.math.rsqrt(x) * tf.math.log(x) - tf.math.reciprocal(x) + tf.square(x)
        ),
        [spec(None, 20)],
        1,
        positive=True,
    ),
    Case(
        "pow",
        lambda x: tf.pow(x, 3.0) + tf.pow(x, 0.7) * tf.math.log1p(x),
        [spec(None, 20)],
        1,
        positive=True,
    ),
    Case(
        "rounding",
        lambda x: (
            tf.floor(x * 3.0)
            + tf.math.ceil(x)
            - tf.round(x * 2.0)
            + tf.sign(x) * tf.abs(x)
            + tf.math.erf(x)
            - tf.math.erfc(x)
        ),
        [spec(None, 21)],
        1,
    ),
    Case("add_n", lambda a, b, c: tf.tanh(tf.add_n([a, b, c])), [spec(None, 8)] * 3, 1),
    Case("batch_norm_relu", _batch_norm, [spec(None, 4, 4, 16)], 1),
    Case(  # the matmul is a tile of the second kernel; its operand comes from the first
        "matmul_between",
        lambda x, w: tf.nn.relu(tf.matmul(tf.tanh(x) * 2.0, w) + 1.0) * 3.0,
        [spec(None, 8), spec(8, 8)],
        2,
    ),
    Case(  # transposed operands are not tiled: the matmul stays a library call between kernels
        "matmul_transposed_between",
        lambda x, w: tf.nn.relu(tf.matmul(tf.tanh(x) * 2.0, w, transpose_b=True) + 1.0) * 3.0,
        [spec(None, 8), spec(8, 8)],
        2,
        {"MatMul": 1},
    ),
    Case(  # Keras' RepeatVector: a Tile of a size-1 axis is a broadcast
        "tile_as_broadcast",
        lambda x, y: tf.tanh(tf.tile(x[:, None, :], [1, 4, 1]) + y) * 2.0,
        [spec(None, 8), spec(None, 4, 8)],
        1,
    ),
    Case(  # an LSTM cell: the recurrent matmul, its four gate windows and the update, one kernel
        "lstm_cell",
        lambda h, c, xw, u: _lstm_cell(h, c, xw, u),
        [spec(None, 16), spec(None, 16), spec(None, 64), spec(16, 64)],
        1,
    ),
    Case(  # columns not a multiple of the vector width, several rows per block, a tile output
        "matmul_odd_columns_and_output",
        lambda x, w: _matmul_and_epilogue(x, w),
        [spec(None, 21), spec(21, 83)],
        1,
    ),
    Case(  # T5's attention: transposed heads, a position bias, softmax, context: one kernel
        "attention",
        lambda q, k, v, bias: _attention(q, k, v, bias),
        [spec(None, 12, 2, 8), spec(None, 12, 2, 8), spec(None, 12, 2, 8), spec(1, 2, 12, 12)],
        1,
    ),
]


def _attention(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
    q, k, v = (tf.transpose(t, [0, 2, 1, 3]) for t in (q, k, v))
    p = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) * 0.35 + bias)
    return tf.transpose(tf.matmul(p, v), [0, 2, 1, 3])


def _matmul_and_epilogue(x: tf.Tensor, w: tf.Tensor) -> Any:
    m = tf.matmul(x, w)
    return m, tf.sigmoid(m) * 2.0 + 1.0


def _lstm_cell(h: tf.Tensor, c: tf.Tensor, xw: tf.Tensor, u: tf.Tensor) -> Any:
    i, f, g, o = tf.split(xw + tf.matmul(h, u), 4, axis=1)
    c2 = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
    return tf.sigmoid(o) * tf.tanh(c2), c2


def _counted_ops(graph_def: Any) -> Counter[str]:
    return Counter(n.op for n in graph_def.node if n.op not in _NOT_COUNTED)


def _inputs(case: Case, batch: int, seed: int) -> list[tf.Tensor]:
    xs = random_inputs(case.signature, batch=batch, seed=seed)
    if case.positive:
        xs = [tf.abs(x) + 0.5 for x in xs]
    return xs


def _check(case: Case, fn: Callable[..., Any], signature: list[tf.TensorSpec]) -> None:
    original = tf.function(fn, input_signature=signature)
    optimized = tf_stitch.optimize(original)
    counts = _counted_ops(optimized.graph_def)
    assert counts.pop("StitchedKernel", 0) == case.kernels, tf_stitch.explain(optimized)
    assert dict(counts) == case.remaining, tf_stitch.explain(optimized)
    for batch, seed in ((3, 0), (1, 1), (6, 2)):
        xs = _inputs(case, batch, seed)
        assert_close(original(*xs), optimized(*xs), **case.tol)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_optimized_graph_matches_tensorflow(case: Case) -> None:
    _check(case, case.fn, case.signature)


@pytest.mark.parametrize("builder", [_dense_ln_block, _encoder], ids=["dense_ln", "encoder"])
def test_keras_blocks_match_tensorflow(builder: Callable[[], Any]) -> None:
    fn, signature = builder()
    original = tf.function(fn, input_signature=signature)
    optimized = tf_stitch.optimize(original)
    kernels = sum(1 for n in optimized.graph_def.node if n.op == "StitchedKernel")
    assert kernels >= 1
    for batch, seed in ((2, 0), (1, 1), (5, 2)):
        xs = random_inputs(signature, batch=batch, seed=seed)
        assert_close(original(*xs), optimized(*xs), rtol=1e-4, atol=1e-4)


def test_encoder_stitches_every_memory_bound_region() -> None:
    """Bias+residual+LayerNorm twice, bias+GELU, and the attention (the per-head bias adds of
    Q, K and V, both Einsums and the softmax): four kernels; only the projections' matmuls stay
    TensorFlow ops."""
    fn, signature = _encoder()
    optimized = tf_stitch.optimize(tf.function(fn, input_signature=signature))
    counts = _counted_ops(optimized.graph_def)
    assert counts["StitchedKernel"] == 4, tf_stitch.explain(optimized)
    assert set(counts) <= {"StitchedKernel", "BatchMatMulV2", "MatMul"}, counts
    assert any(k.schedule.startswith("attention") for k in optimized.kernels)
