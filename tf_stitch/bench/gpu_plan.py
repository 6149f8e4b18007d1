"""The GPU model's count of the graph optimize() plans for a GPU, in a process of its own where
this one cannot run that graph.

The graph planned for a GPU runs its convolutions and pools in NCHW (passes/nchw_layout.py);
it is counted by running it on the host and tracing it, which TensorFlow's CPU kernels can do
only through oneDNN. Where oneDNN is off (TensorFlow's default on some CPUs, such as AMD
EPYCs), a benchmark measures latency in that default, as users run TensorFlow there, and counts
the GPU plan in a child process with oneDNN on (`TF_ENABLE_ONEDNN_OPTS=1`), which rebuilds the
same seeded model and reports the count and the GPU graph's error as JSON on its last line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

MARKER = "GPU_PLAN "


@dataclass
class GpuPlanCount:
    kernels: int
    by_type: dict[str, int] = field(default_factory=dict)
    max_abs_error: float = 0.0  # the GPU graph's outputs against the original's
    outputs_match: bool = True
    notes: list[str] = field(default_factory=list)


def count_gpu_plan(
    fn: Any, signature: Sequence[Any], inputs: Sequence[Any], freeze: bool = False
) -> GpuPlanCount:
    """Optimizes `fn` for a GPU (NCHW convolutions; variables live unless `freeze`), checks
    its outputs against `fn`'s, runs and traces it, and applies the GPU model. Needs a host
    that runs NCHW convolutions (oneDNN on)."""
    import tensorflow as tf

    import tf_stitch
    from tf_stitch.bench.measure import max_error
    from tf_stitch.profiler.gpu_launches import count_gpu_launches
    from tf_stitch.profiler.op_launches import count_tf_launches

    original = tf.function(fn, input_signature=list(signature))
    gpu = tf_stitch.optimize(original.get_concrete_function(), conv_layout="NCHW", freeze=freeze)
    expected = [t.numpy() for t in tf.nest.flatten(original(*inputs))]
    got = [t.numpy() for t in tf.nest.flatten(gpu(*inputs))]
    error, match = max_error(expected, got)
    run = count_tf_launches(gpu, inputs)
    counted = count_gpu_launches(run, gpu.graph, {k.node for k in gpu.kernels if k.cuda_source})
    return GpuPlanCount(counted.total, dict(counted.by_type), error, match, list(counted.notes))


def report(count: GpuPlanCount) -> None:
    """The child's answer, on its last line of standard output."""
    print(MARKER + json.dumps(asdict(count)), flush=True)


def count_in_child(argv: Sequence[str], timeout_s: float = 3600) -> GpuPlanCount:
    """Runs `python argv...` with oneDNN on and reads its `report`. Raises RuntimeError with
    the child's last words when it gives none."""
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="1", TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(
        [sys.executable, *argv], env=env, capture_output=True, text=True, timeout=timeout_s
    )
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(MARKER):
            return GpuPlanCount(**json.loads(line[len(MARKER) :]))
    tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
    raise RuntimeError(
        f"the GPU plan's count in a child process failed (exit {done.returncode}): "
        + " | ".join(tail)
    )
