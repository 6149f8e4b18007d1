"""A bundle of independent elementwise kernels: one StitchedKernel giving TensorFlow's answers,
as C++, as its CUDA source run through the SIMT emulation, and compiled by nvcc."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close

import tf_stitch
from tf_stitch.runtime.cuda_compiler import compile_fatbin, find_nvcc

S = tf.TensorSpec
SIGNATURE = [S([3, 5]), S([7]), S([2, 3, 4])]


def _fn(a: tf.Tensor, b: tf.Tensor, c: tf.Tensor) -> tuple[tf.Tensor, ...]:
    return (
        tf.tanh(a) * 2.0 + a,
        tf.sigmoid(b) - b * b,
        tf.exp(c) * 0.5 - tf.abs(c),
        tf.tanh(a) + 1.0,  # another output of the first kernel
    )


def _inputs() -> list[tf.Tensor]:
    rng = np.random.default_rng(4)
    return [tf.constant(rng.standard_normal(s.shape).astype(np.float32)) for s in SIGNATURE]


@pytest.mark.parametrize("source", ["cpu", "simt"])
def test_a_bundle_is_one_kernel_with_tensorflow_s_answers(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TF_STITCH_KERNELS", source)
    original = tf.function(_fn, input_signature=SIGNATURE)
    optimized = tf_stitch.optimize(original)
    (kernel,) = optimized.kernels
    assert kernel.schedule.startswith("bundle of 3 kernels")
    assert len(kernel.outputs) == 4
    x = _inputs()
    assert_close([t.numpy() for t in optimized(*x)], [t.numpy() for t in original(*x)])
    assert "bundle" in tf_stitch.explain(optimized)


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found")
def test_a_bundle_s_cuda_source_compiles() -> None:
    sources = tf_stitch.generated_code(tf.function(_fn, input_signature=SIGNATURE), target="cuda")
    (source,) = sources.values()
    assert source.count("static __device__ __forceinline__ void ts_m") == 3
    assert compile_fatbin(source).path.stat().st_size > 0
