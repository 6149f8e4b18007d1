"""XLA:GPU kernel counts without a GPU: TensorFlow's HLO compiled by JAX's XLA for an H100 or
H200 description in a subprocess (skipped, with the reason, where the xla-gpu extra is absent)."""

from __future__ import annotations

import importlib.util

import pytest
import tensorflow as tf

from tf_stitch.launches import xla_gpu
from tf_stitch.launches.xla_gpu import count_xla_gpu_launches, optimized_gpu_hlo, unavailable

needs_extra = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))


def _layer_norm_gelu(x: tf.Tensor) -> tf.Tensor:
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.square(x - m), -1, keepdims=True)
    return tf.nn.gelu((x - m) * tf.math.rsqrt(v + 1e-5))


def _dense_relu(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    return tf.nn.relu(tf.matmul(x, w) + 1.0)


@needs_extra
@pytest.mark.parametrize("target", sorted(xla_gpu.TARGETS))
def test_layer_norm_and_gelu_is_one_fusion_on_a_gpu(target: str) -> None:
    kernels = count_xla_gpu_launches(_layer_norm_gelu, [tf.random.normal([64, 768])], target)
    assert (kernels.total, kernels.by_opcode) == (1, {"fusion": 1})


@needs_extra
def test_the_gemm_backend_is_pinned() -> None:
    args = [tf.random.normal([64, 256]), tf.random.normal([256, 128])]
    triton = count_xla_gpu_launches(_dense_relu, args, triton_gemm=True)
    cublas = count_xla_gpu_launches(_dense_relu, args, triton_gemm=False)
    assert triton.by_opcode == {"fusion": 2}  # a Triton GEMM fusion and the epilogue
    assert cublas.by_opcode == {"custom-call": 1, "fusion": 1}  # a cuBLAS call


@needs_extra
def test_a_module_xla_rejects_is_an_error_with_its_message() -> None:
    with pytest.raises(RuntimeError, match="XLA:GPU could not compile the module for h100"):
        optimized_gpu_hlo(b"not an HLO module")


def test_unknown_targets_are_refused() -> None:
    with pytest.raises(ValueError, match="target must be one of"):
        optimized_gpu_hlo(b"", target="v100")


def test_without_the_extra_the_reason_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "jax" else real(name, *a)
    )
    reason = unavailable()
    assert reason is not None and "jax is missing" in reason and "--no-deps" in reason
