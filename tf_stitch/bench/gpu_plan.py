"""The GPU model's count of the graph optimize() plans for a GPU, in a process of its own where
this one cannot run that graph.

The graph planned for a GPU runs its convolutions and pools in NCHW (passes/nchw_layout.py);
it is counted by running it on the host and tracing it, which TensorFlow's CPU kernels can do
only through oneDNN. Where oneDNN is off (TensorFlow's default on some CPUs, such as AMD
EPYCs), a benchmark measures latency in that default, as users run TensorFlow there, and counts
the GPU plan in a child process with oneDNN on (`TF_ENABLE_ONEDNN_OPTS=1`), which rebuilds the
same seeded model and reports the count and the GPU graph's error as JSON on its last line.
oneDNN runs NCHW convolutions with its reference kernel (minutes for one run of a VGG16), so the
child runs the plan's convolutions in NHWC between transposes it does not count
(bench/host_twin.py): ResNet50, MobileNet and EfficientNetB0 counted both ways gave the same
kernels, op by op, in 13-19 s instead of about ten minutes each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tf_stitch.launches.op_launches import OpLaunches

MARKER = "GPU_PLAN "


@dataclass
class GpuPlanCount:
    kernels: int
    by_type: dict[str, int] = field(default_factory=dict)
    max_abs_error: float = 0.0  # the GPU graph's outputs against the original's
    outputs_match: bool = True
    notes: list[str] = field(default_factory=list)


def count_gpu_plan(
    fn: Any,
    signature: Sequence[Any],
    inputs: Sequence[Any],
    freeze: bool = False,
    nhwc_on_host: bool = True,
) -> GpuPlanCount:
    """Optimizes `fn` for a GPU (NCHW convolutions; variables live unless `freeze`), checks
    its outputs against `fn`'s, runs and traces it, and applies the GPU model. Needs a host
    that runs NCHW ops (oneDNN on). With `nhwc_on_host` the plan's convolutions run NHWC
    between transposes the count leaves out (bench/host_twin.py: oneDNN's NCHW convolutions
    are its reference kernels, hundreds of times slower)."""
    import tensorflow as tf

    import tf_stitch
    from tf_stitch.bench.measure import max_error
    from tf_stitch.launches.gpu_launches import count_gpu_launches
    from tf_stitch.launches.op_launches import count_tf_launches

    original = tf.function(fn, input_signature=list(signature))
    gpu = tf_stitch.optimize(original.get_concrete_function(), conv_layout="NCHW", freeze=freeze)
    notes: list[str] = []
    runnable, kept = host_twin_of(gpu, notes) if nhwc_on_host else (gpu, [])
    expected = [t.numpy() for t in tf.nest.flatten(original(*inputs))]
    got = [t.numpy() for t in tf.nest.flatten(runnable(*inputs))]
    error, match = max_error(expected, got)
    run = without_twin_nodes(count_tf_launches(runnable, inputs, steps=1, warmup=1))
    del kept
    counted = count_gpu_launches(run, gpu.graph, {k.node for k in gpu.kernels if k.cuda_source})
    notes.extend(counted.notes)
    return GpuPlanCount(counted.total, dict(counted.by_type), error, match, notes)


def host_twin_of(gpu: Any, notes: list[str]) -> tuple[Any, list[Any]]:
    """The optimized function `gpu` with its NCHW convolutions run NHWC (bench/host_twin.py),
    and the variables it reads its permutations from."""
    from tf_stitch.bench.host_twin import host_twin, twin_variables
    from tf_stitch.optimize import OptimizedFunction

    twin, perms, moved = host_twin(gpu.graph)
    if not moved:
        return gpu, []
    handles, kept = twin_variables(perms)
    runnable = OptimizedFunction(
        twin,
        gpu.context,
        gpu.original,
        gpu.structured_inputs,
        gpu.structured_outputs,
        {**gpu.live_variables, **handles},
    )
    notes.append(
        f"{moved} NCHW convolutions run NHWC between transposes on this host, which are not "
        "counted (oneDNN runs NCHW convolutions with its reference kernel)"
    )
    return runnable, kept


def without_twin_nodes(ops: OpLaunches) -> OpLaunches:
    """`ops` less the runs of nodes bench/host_twin.py added."""
    from tf_stitch.bench.host_twin import is_twin_node

    runs = {run: n for run, n in ops.runs.items() if not is_twin_node(run.node)}
    dropped = ops.per_step - sum(runs.values())
    by_type: Counter[str] = Counter()
    for run, n in runs.items():
        by_type[run.op] += n
    return replace(  # (of the step counted; the twin's transposes run once a step)
        ops,
        per_step=ops.per_step - dropped,
        min_per_step=ops.min_per_step - dropped,
        max_per_step=ops.max_per_step - dropped,
        by_type=dict(sorted(by_type.items())),
        runs=runs,
    )


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
