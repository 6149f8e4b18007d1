"""Golden files: the C++ emitted for a few small kernels is pinned (STYLE item 9).

A change to planning, lowering or emission that alters generated code shows up here as a diff.
Only the kernel itself is compared, from the first `extern "C"` line on: the math header and the
op helpers above it may change without touching these files.

If the change is intended, regenerate the files and review the diff:

    TF_STITCH_UPDATE_GOLDEN=1 pytest tests/codegen/test_golden.py
    git diff tests/codegen/golden/
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tensorflow as tf

from tf_stitch.codegen.cpu import emit_cpu
from tf_stitch.codegen.lower import lower
from tf_stitch.fusion.planner import plan_groups
from tf_stitch.graph import frontends

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE = os.environ.get("TF_STITCH_UPDATE_GOLDEN") == "1"
S = tf.TensorSpec


def layer_norm(x: tf.Tensor) -> tf.Tensor:
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.square(x - m), -1, keepdims=True)
    return (x - m) * tf.math.rsqrt(v + 1e-5) * 1.5 + 0.25


def softmax(x: tf.Tensor) -> tf.Tensor:
    e = tf.exp(x - tf.reduce_max(x, -1, keepdims=True))
    return e / tf.reduce_sum(e, -1, keepdims=True)


def bias_gelu(x: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    y = x + b
    return 0.5 * y * (1.0 + tf.tanh(0.7978845608 * (y + 0.044715 * tf.pow(y, 3.0))))


KERNELS: dict[str, tuple[Callable[..., Any], list[tf.TensorSpec]]] = {
    "layer_norm": (layer_norm, [S([None, 64])]),
    "softmax": (softmax, [S([8, 128])]),
    "bias_gelu": (bias_gelu, [S([None, 32]), S([32])]),
}


def kernel_text(name: str) -> str:
    """The emitted kernel of `name`, from its first `extern "C"` line on."""
    fn, specs = KERNELS[name]
    graph = frontends.load(tf.function(fn).get_concrete_function(*specs)).graph
    (group,) = plan_groups(graph).groups
    source = emit_cpu(lower(graph, group, name))
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
    expected = path.read_text()
    assert text == expected, (
        f"the C++ emitted for {name} changed; if intended, regenerate with "
        f"TF_STITCH_UPDATE_GOLDEN=1 pytest tests/codegen/test_golden.py and review the diff"
    )


def test_every_golden_file_has_a_kernel() -> None:
    assert sorted(p.stem for p in GOLDEN_DIR.glob("*.cc")) == sorted(KERNELS)
