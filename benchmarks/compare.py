"""What every benchmark script measures for one function: TF vs XLA:CPU vs tf_stitch (the CPU
columns of `tf-stitch bench`, from `tf_stitch.bench.measure_function`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from tf_stitch.bench import measure_function

VARIANTS = ("TensorFlow", "XLA:CPU", "tf_stitch")


def compare(
    fn: Callable[..., Any],
    signature: Sequence[tf.TensorSpec],
    inputs: Sequence[tf.Tensor],
    rounds: int,
) -> dict[str, Any]:
    """Optimizes `fn`, checks it against the original, counts kernels per step (profiler traces
    for TF and tf_stitch, optimized HLO for XLA:CPU) and times the three variants interleaved."""
    m = measure_function(fn, signature, inputs, rounds, gpu_target=None)
    return {
        "kernels": {
            "TensorFlow": m.kernels["tf"],
            "XLA:CPU": m.kernels["xla_cpu"],
            "tf_stitch": m.kernels["tf_stitch_cpu"],
        },
        "latency": m.latency,
        "max_abs_error": m.max_abs_error,
        "stitched_kernels": m.stitched_kernels,
        "notes": m.notes,
    }
