"""explain(): one table of every decision, each once, including what went wrong after planning:
a kernel the CUDA emitter refused and a kernel the compiler failed on."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import tf_stitch

S = tf.TensorSpec


def _decisions(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("decisions: "))
    return [line.strip() for line in lines[start + 1 :] if line.startswith("  ")]


def _long_rows(x: tf.Tensor) -> tf.Tensor:
    e = tf.exp(x - tf.reduce_max(x, -1, keepdims=True)) * tf.tanh(x)
    s = e / tf.reduce_sum(e, -1, keepdims=True)
    return s * tf.math.rsqrt(tf.reduce_mean(tf.square(s), -1, keepdims=True) + 1.0)


def test_a_kernel_the_cuda_emitter_refuses_is_a_row_of_the_table() -> None:
    # With room for its three 64 KB rows on chip (a CPU's cache), the kernel is built for the
    # CPU; its CUDA build would need 128 KB of shared memory per block, over the limit.
    cf = tf.function(_long_rows).get_concrete_function(S([None, 16384]))
    optimized = tf_stitch.optimize(cf, on_chip_budget=300_000)
    rows = _decisions(tf_stitch.explain(optimized))
    (cuda,) = [r for r in rows if r.startswith("cuda ")]
    assert "kernel stitched_0: forbid(no CUDA build, the CPU's only:" in cuda
    assert "B of shared memory per block (limit 40960)" in cuda
    assert any(r.startswith("memory  keep ") and ": allow(cost " in r for r in rows)
    assert len(rows) == len(set(rows))
    x = np.random.default_rng(0).standard_normal((3, 16384)).astype(np.float32)
    np.testing.assert_allclose(optimized(x), cf(x), rtol=1e-5, atol=1e-6)


def test_a_kernel_the_compiler_fails_on_is_a_row_of_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TF_STITCH_CXX", "/bin/false")  # a compiler that always fails
    cf = tf.function(lambda x: tf.tanh(x) * 3.0 + tf.exp(x) * 1.5).get_concrete_function(
        S([None, 7])
    )
    with pytest.warns(RuntimeWarning, match="stays as TensorFlow ops: its kernel cannot be built"):
        optimized = tf_stitch.optimize(cf)
    text = tf_stitch.explain(optimized)
    assert text.startswith("tf_stitch: 0 stitched kernel(s)")
    (failed,) = [r for r in _decisions(text) if r.startswith("compile ")]
    assert "kernel stitched_0: forbid(its kernel cannot be built: the compiler failed" in failed
    assert "/bin/false" in failed
    x = np.random.default_rng(0).standard_normal((4, 7)).astype(np.float32)
    np.testing.assert_allclose(optimized(x), cf(x), rtol=1e-6)
