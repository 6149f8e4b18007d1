"""What every benchmark measures for one function: TF vs XLA:CPU vs tf_stitch."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

import tf_stitch
from tf_stitch.profiler.timing import interleaved

VARIANTS = ("TensorFlow", "XLA:CPU", "tf_stitch")


def compare(
    fn: Callable[..., Any],
    signature: Sequence[tf.TensorSpec],
    inputs: Sequence[tf.Tensor],
    rounds: int,
) -> dict[str, Any]:
    """Optimizes `fn`, checks it against the original, counts kernels per step (profiler traces
    for TF and tf_stitch, optimized HLO for XLA:CPU) and times the three variants interleaved."""
    original = tf.function(fn, input_signature=list(signature))
    xla = tf.function(fn, jit_compile=True)
    optimized = tf_stitch.optimize(original)
    expected = tf.nest.flatten(original(*inputs))
    got = tf.nest.flatten(optimized(*inputs))
    error = max(
        float(np.max(np.abs(e.numpy() - g.numpy()), initial=0.0))
        for e, g in zip(expected, got, strict=True)
    )
    report = tf_stitch.count_launches(optimized, *inputs)
    calls = {
        "TensorFlow": lambda: original(*inputs),
        "XLA:CPU": lambda: xla(*inputs),
        "tf_stitch": lambda: optimized(*inputs),
    }
    return {
        "kernels": {
            "TensorFlow": report.tf,
            "XLA:CPU": report.xla_cpu,
            "tf_stitch": report.tf_stitch,
        },
        "latency": interleaved(calls, rounds=rounds, warmup=3),
        "max_abs_error": error,
        "stitched_kernels": len(optimized.kernels),
        "notes": report.notes,
    }
