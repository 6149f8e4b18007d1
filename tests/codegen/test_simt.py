"""The CUDA kernels, run on the CPU through the SIMT emulation, give TensorFlow's answers.

Every numerics case (tests/test_numerics.py) is optimized with TF_STITCH_KERNELS=simt: each
kernel is the exact CUDA source nvcc compiles, with the emulation header in front. Kernels the
CUDA emitter does not emit yet (matmul tiles, gathers) stay TensorFlow ops and say so.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close
from test_numerics import CASES, Case, _inputs

import tf_stitch
from tf_stitch.codegen import cuda

NOT_YET = "not emitted as CUDA yet"


def _optimize(fn: object, signature: list[tf.TensorSpec]) -> tuple[object, object, list[str]]:
    original = tf.function(fn, input_signature=signature)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimized = tf_stitch.optimize(original)
    return original, optimized, [str(w.message) for w in caught]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_cuda_kernels_match_tensorflow(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_STITCH_KERNELS", "simt")
    original, optimized, messages = _optimize(case.fn, case.signature)
    not_yet = [m for m in messages if NOT_YET in m]
    assert len(messages) == len(not_yet), messages  # nothing else went wrong
    assert len(optimized.kernels) == case.kernels - len(not_yet)
    for k in optimized.kernels:
        assert "__global__" in k.source and "ts_emu::launch" in k.source
    for batch, seed in ((3, 0), (1, 1)):
        xs = _inputs(case, batch, seed)
        assert_close(original(*xs), optimized(*xs), **case.tol)


def _layer_norm(x: tf.Tensor) -> tf.Tensor:
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.square(x - m), -1, keepdims=True)
    return (x - m) * tf.math.rsqrt(v + 1e-5)


# Bugs a CUDA kernel could have; each must make the emulated kernel give wrong values.
PLANTED = {
    # the warps' partials are read before every warp has written its own
    "missing barrier": (
        "if (lane == 0) scratch[warp] = v;\n  __syncthreads();",
        "if (lane == 0) scratch[warp] = v;",
    ),
    # threads skip every other element of the row
    "wrong stride": ("i += blockDim.x", "i += 2 * blockDim.x"),
    # the per-warp scratch holds one warp's partial only
    "shared memory too small": (
        "v = lane < ((blockDim.x + 31u) >> 5) ? scratch[lane] : identity;",
        "v = lane < 1u ? scratch[lane] : identity;",
    ),
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_a_planted_bug_is_caught(bug: str, monkeypatch: pytest.MonkeyPatch) -> None:
    good, bad = PLANTED[bug]
    emit = cuda.CudaEmitter.source

    def planted(self: cuda.CudaEmitter) -> str:
        text = emit(self)
        assert good in text, f"the planted bug's site moved: {good!r}"
        return text.replace(good, bad)

    monkeypatch.setenv("TF_STITCH_KERNELS", "simt")
    monkeypatch.setattr(cuda.CudaEmitter, "source", planted)
    original, optimized, messages = _optimize(_layer_norm, [tf.TensorSpec([None, 200])])
    assert len(optimized.kernels) == 1, messages
    x = tf.random.normal([4, 200], seed=3)
    difference = np.abs(original(x).numpy() - optimized(x).numpy())
    # Caught: some value is off by more than 1e-3, or not a number (a slot never written holds
    # whatever the memory held, NaN included).
    caught = bool(np.any(~(difference <= 1e-3)))
    assert caught, f"the {bug} went unnoticed (max error {float(np.max(difference))})"


def test_emulated_source_is_the_cuda_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_STITCH_KERNELS", "simt")
    _, optimized, _ = _optimize(_layer_norm, [tf.TensorSpec([None, 64])])
    (kernel,) = optimized.kernels
    cu = kernel.source[
        kernel.source.index("// tf_stitch kernel") : kernel.source.index('extern "C" int')
    ]
    assert re.search(r'extern "C" __global__ void __launch_bounds__\(\d+\) \w+\(', cu)
    assert "ts_block_reduce<0>" in cu and "__shfl_xor_sync" in cu


def test_a_gathered_index_out_of_range_fails_through_the_error_cell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TF_STITCH_KERNELS", "simt")
    table = tf.constant(np.arange(40, dtype=np.float32).reshape(10, 4))
    fn = lambda ids: tf.tanh(tf.gather(table, ids)) * 2.0  # noqa: E731
    _, optimized, messages = _optimize(fn, [tf.TensorSpec([None], tf.int32)])
    assert len(optimized.kernels) == 1, messages
    (kernel,) = optimized.kernels
    assert "ts_gather_error(ts_error" in kernel.cuda_source
    ids = tf.constant([1, 9, 0], tf.int32)
    assert_close(fn(ids), optimized(ids))
    with pytest.raises(tf.errors.InvalidArgumentError, match="a gathered index, 10, is not in"):
        optimized(tf.constant([1, 10, 0], tf.int32))
