"""Golden files: the C++ (and for four, the CUDA) generated for representative kernels is
pinned (STYLE item 9).

The kernels come from `tf_stitch.generated_code`, i.e. the whole pipeline (decompositions,
slices, planning, lowering, emission), so any change that alters generated code shows up here as
a diff. Only the kernel itself is compared, from the first `extern "C"` line on: the math header
and the op helpers above it may change without touching these files.

The files change only on request. If the change is intended, regenerate them and review the diff:

    TF_STITCH_UPDATE_GOLDEN=1 pytest tests/test_golden.py
    git diff tests/golden/
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tensorflow as tf

import tf_stitch

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE = os.environ.get("TF_STITCH_UPDATE_GOLDEN") == "1"
S = tf.TensorSpec


def layer_norm(x: tf.Tensor) -> tf.Tensor:
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.square(x - m), -1, keepdims=True)
    return (x - m) * tf.math.rsqrt(v + 1e-5) * 1.5 + 0.25


def softmax(x: tf.Tensor) -> tf.Tensor:
    return tf.nn.softmax(x)


def bias_gelu(x: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    y = x + b
    return 0.5 * y * (1.0 + tf.tanh(0.7978845608 * (y + 0.044715 * tf.pow(y, 3.0))))


def lstm_gates(zx: tf.Tensor, zh: tf.Tensor, c: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """An LSTM step after its two matmuls: the gates are windows of the matmul outputs."""
    i, f, g, o = tf.split(zx + zh + 0.1, 4, axis=1)
    c2 = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
    return tf.sigmoid(o) * tf.tanh(c2), c2


def siblings(a: tf.Tensor, b: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Two independent regions of one layer (of one batch size: the shapes say so) make one
    kernel with two outputs."""
    return tf.nn.relu(a * 2.0 + 1.0), tf.sigmoid(b) * 3.0


def gru_step(h: tf.Tensor, x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    """A TF1-style GRU step: the matmul of concat([x, h]) is a tile read in two segments."""
    z, r = tf.split(tf.sigmoid(tf.matmul(tf.concat([x, h], 1), w)), 2, axis=1)
    return z * h + (1.0 - z) * tf.tanh(r * h)


def skip_gram(center: tf.Tensor, context: tf.Tensor, table: tf.Tensor) -> tf.Tensor:
    """Two gathered rows of a table, their dot product and log-sigmoid."""
    dot = tf.reduce_sum(tf.gather(table, center) * tf.gather(table, context), -1)
    return tf.math.log_sigmoid(dot)


def batch_norm_training(x: tf.Tensor) -> tf.Tensor:
    """Statistics over N,H,W of an NHWC tensor and the normalization: one column kernel."""
    mean = tf.reduce_mean(x, [0, 1, 2], keepdims=True)
    var = tf.reduce_mean(tf.square(x - mean), [0, 1, 2], keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + 1e-3)


def attention(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
    """T5's attention: heads split by transposes, a position bias, softmax, heads merged."""
    heads = [tf.transpose(t, [0, 2, 1, 3]) for t in (q, k, v)]
    scores = tf.matmul(heads[0], heads[1], transpose_b=True) + bias
    return tf.transpose(tf.matmul(tf.nn.softmax(scores), heads[2]), [0, 2, 1, 3])


KERNELS: dict[str, tuple[Callable[..., Any], list[tf.TensorSpec]]] = {
    "layer_norm": (layer_norm, [S([None, 64])]),
    "softmax": (softmax, [S([8, 128])]),
    "bias_gelu": (bias_gelu, [S([None, 32]), S([32])]),
    "lstm_gates": (lstm_gates, [S([None, 64]), S([None, 64]), S([None, 16])]),
    "siblings": (siblings, [S([8, 24]), S([8, 24])]),
    "gru_step": (gru_step, [S([None, 32]), S([None, 16]), S([48, 64])]),
    "skip_gram": (skip_gram, [S([None], tf.int32), S([None], tf.int32), S([100, 32])]),
    "batch_norm_training": (batch_norm_training, [S([None, 7, 7, 48])]),
    "attention": (attention, [S([None, None, 4, 16])] * 3 + [S([1, 4, None, None])]),
}


def kernel_text(name: str) -> str:
    """The generated kernel of `name`, from its first `extern "C"` line on."""
    fn, specs = KERNELS[name]
    sources = tf_stitch.generated_code(tf.function(fn, input_signature=specs))
    assert len(sources) == 1, sorted(sources)
    (source,) = sources.values()
    start = source.index('extern "C"')
    assert source.rfind("\n", 0, start) == start - 1, 'extern "C" should start a line'
    return source[start:]


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_generated_kernel_matches_golden_file(name: str) -> None:
    path = GOLDEN_DIR / f"{name}.cc"
    text = kernel_text(name)
    if UPDATE:
        GOLDEN_DIR.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run TF_STITCH_UPDATE_GOLDEN=1 pytest {__file__}"
    assert text == path.read_text(), (
        f"the C++ generated for {name} changed; if intended, regenerate with "
        "TF_STITCH_UPDATE_GOLDEN=1 pytest tests/test_golden.py and review the diff"
    )


def test_every_golden_file_has_a_kernel() -> None:
    assert sorted(p.stem for p in GOLDEN_DIR.glob("*.cc")) == sorted(KERNELS)
    assert sorted(p.stem for p in GOLDEN_DIR.glob("*.cu")) == sorted(CUDA_KERNELS)


# The CUDA of four kernels: a row kernel with block reductions, a column kernel, a matmul tile
# in shared memory and an attention; compared from the kernel's `extern "C" __global__` line on.
CUDA_KERNELS = ("layer_norm", "batch_norm_training", "gru_step", "attention")


@pytest.mark.parametrize("name", CUDA_KERNELS)
def test_generated_cuda_matches_golden_file(name: str) -> None:
    fn, specs = KERNELS[name]
    (source,) = tf_stitch.generated_code(
        tf.function(fn, input_signature=specs), target="cuda"
    ).values()
    text = source[source.index('extern "C" __global__') :]
    path = GOLDEN_DIR / f"{name}.cu"
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run TF_STITCH_UPDATE_GOLDEN=1 pytest {__file__}"
    assert text == path.read_text(), (
        f"the CUDA generated for {name} changed; if intended, regenerate with "
        "TF_STITCH_UPDATE_GOLDEN=1 pytest tests/test_golden.py and review the diff"
    )


def test_generated_code_of_an_optimized_function_is_what_runs() -> None:
    fn = tf.function(softmax, input_signature=KERNELS["softmax"][1])
    optimized = tf_stitch.optimize(fn)
    assert tf_stitch.generated_code(optimized) == tf_stitch.generated_code(fn)
