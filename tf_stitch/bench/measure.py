"""Everything `tf-stitch bench` measures for one function: kernels per step six ways, CPU latency
of TF, XLA:CPU and tf_stitch interleaved, the optimizer's own time, and the numerical check."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf

from tf_stitch.bench.latency_ratio import confirm, paired_ratio, unsure
from tf_stitch.launches import xla_gpu
from tf_stitch.profiler.measure.stability import Estimate
from tf_stitch.profiler.measure.timing import Latency, interleaved

# Kernels per step, in table order: TF's executor trace (as this CPU ran it and as a GPU would
# run it), XLA:CPU's and XLA:GPU's optimized modules (GPU: both GEMM backends, since nothing is
# autotuned without a GPU), and tf_stitch's optimized graph as a GPU would run it and as this
# CPU ran it.
KERNEL_COLUMNS: dict[str, str] = {
    "tf": "TensorFlow",
    "tf_gpu": "TensorFlow (GPU model)",
    "xla_cpu": "XLA:CPU",
    "xla_gpu_triton": "XLA:GPU (Triton GEMM)",
    "xla_gpu_cublas": "XLA:GPU (cuBLAS)",
    "tf_stitch_gpu": "tf_stitch (GPU)",
    "tf_stitch_cpu": "tf_stitch (CPU)",
}
LATENCY_COLUMNS = ("TensorFlow", "XLA:CPU", "tf_stitch")
TOLERANCE = 1e-4  # rtol = atol for the numerical check against the unoptimized function

Step = Callable[[str], None]


@dataclass
class Measurement:
    """One function's results; kernel counts are None where they could not be made (`notes`)."""

    kernels: dict[str, int | None]
    latency: dict[str, Latency]
    optimize_s: float
    max_abs_error: float
    outputs_match: bool
    stitched_kernels: int
    gpu_by_type: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Where the outputs do not match: how far TensorFlow's own frozen graph of the function (no
    # tf_stitch pass) is from the function. As large as `max_abs_error`, the model's outputs
    # at these weights depend on the order of float operations, and cannot be checked to 1e-4.
    tf_self_error: float | None = None
    # tf_stitch's time / TensorFlow's, per round (bench/latency_ratio.py); `confirm_rounds` > 0
    # where it was unsure and the two were measured alone for that many more rounds.
    ratio: Estimate | None = None
    confirm_rounds: int = 0

    def xla_gpu_best(self) -> int | None:
        """XLA:GPU's fewer kernels of its two GEMM backends (the harder baseline)."""
        counts = [self.kernels[k] for k in ("xla_gpu_triton", "xla_gpu_cublas")]
        known = [c for c in counts if c is not None]
        return min(known) if known else None


def max_error(expected: Sequence[Any], got: Sequence[Any]) -> tuple[float, bool]:
    error, match = 0.0, True
    for e, g in zip(expected, got, strict=True):
        e, g = np.asarray(e), np.asarray(g)
        error = max(error, float(np.max(np.abs(e - g), initial=0.0)))
        match = match and bool(np.allclose(e, g, rtol=TOLERANCE, atol=TOLERANCE, equal_nan=True))
    return error, match


def _frozen_error(concrete: Any, inputs: Sequence[Any], expected: Sequence[Any]) -> float:
    """The largest difference between the function's outputs and those of TensorFlow's own
    frozen graph of it, run as TensorFlow runs it, with no tf_stitch pass."""
    from tf_stitch.graph import frontends
    from tf_stitch.graph.callable import function_from_graph_def
    from tf_stitch.graph.io import graph_to_graph_def

    graph = frontends.load(concrete, freeze=True).graph
    specs = [tf.TensorSpec(graph.info(r).shape, graph.info(r).dtype) for r in graph.inputs]
    frozen = function_from_graph_def(
        graph_to_graph_def(graph),
        [str(r) for r in graph.inputs],
        [str(r) for r in graph.outputs],
        specs,
    )
    got = [t.numpy() for t in frozen(*tf.nest.flatten(inputs))]
    return max_error(expected, got)[0]


def _xla_gpu_counts(
    fn: Callable[..., Any], inputs: Sequence[Any], target: str, step: Step
) -> tuple[dict[str, int | None], list[str]]:
    counts: dict[str, int | None] = {"xla_gpu_triton": None, "xla_gpu_cublas": None}
    reason = xla_gpu.unavailable()
    if reason is not None:
        return counts, [f"XLA:GPU not counted: {reason}"]
    notes: list[str] = []
    for key, triton in (("xla_gpu_triton", True), ("xla_gpu_cublas", False)):
        step(f"XLA:GPU {target} ({'Triton' if triton else 'cuBLAS'} GEMM)")
        try:
            hlo = xla_gpu.count_xla_gpu_launches(fn, list(inputs), target, triton)
        except RuntimeError as e:
            notes.append(f"{KERNEL_COLUMNS[key]}: {str(e).splitlines()[0]}")
            continue
        counts[key] = hlo.total
        notes.extend(f"{KERNEL_COLUMNS[key]}: {n}" for n in hlo.notes)
    return counts, notes


def measure_function(
    fn: Callable[..., Any],
    signature: Sequence[tf.TensorSpec],
    inputs: Sequence[tf.Tensor],
    rounds: int,
    *,
    gpu_target: str | None = "h100",
    step: Step = lambda _: None,
    freeze: bool = False,
    confirm_rounds: int = 0,
) -> Measurement:
    """Optimizes `fn` (its variables live, or frozen with `freeze`), checks it against the
    original on `inputs`, counts kernels per step and times TF, XLA:CPU and tf_stitch in turn
    in each of `rounds` rounds. `step(label)` is called before each stage (for a progress
    bar). `gpu_target=None` skips the XLA:GPU counts. Where tf_stitch's time per round is
    above 1.03x TensorFlow's but within the rounds' noise, `confirm_rounds` > 0 measures the two
    alone for that many rounds to tell."""
    import tf_stitch

    original = tf.function(fn, input_signature=list(signature))
    step("optimize")
    started = time.perf_counter()
    optimized = tf_stitch.optimize(original.get_concrete_function(), freeze=freeze)
    optimize_s = time.perf_counter() - started
    step("check")
    expected = [t.numpy() for t in tf.nest.flatten(original(*inputs))]
    got = [t.numpy() for t in tf.nest.flatten(optimized(*inputs))]
    error, match = max_error(expected, got)
    tf_self_error = (
        None if match else _frozen_error(original.get_concrete_function(), inputs, expected)
    )
    step("count TF, XLA:CPU, tf_stitch")
    report = tf_stitch.count_launches(optimized, *inputs)
    if report.gpu_optimized is not None and report.gpu_optimized is not optimized:
        # the graph counted for a GPU (NCHW convolutions) must give the same answers too
        gpu_got = [t.numpy() for t in tf.nest.flatten(report.gpu_optimized(*inputs))]
        gpu_error, gpu_match = max_error(expected, gpu_got)
        error, match = max(error, gpu_error), match and gpu_match
    kernels: dict[str, int | None] = {
        "tf": report.tf,
        "tf_gpu": report.tf_gpu,
        "xla_cpu": report.xla_cpu,
        "tf_stitch_gpu": report.tf_stitch_gpu,
        "tf_stitch_cpu": report.tf_stitch,
    }
    notes = list(report.notes)
    gpu_counts: dict[str, int | None] = {"xla_gpu_triton": None, "xla_gpu_cublas": None}
    if gpu_target is not None:
        gpu_counts, gpu_notes = _xla_gpu_counts(fn, inputs, gpu_target, step)
        notes += gpu_notes
    step("timing")
    xla = tf.function(fn, jit_compile=True)
    calls = {
        "TensorFlow": lambda: original(*inputs),
        "XLA:CPU": lambda: xla(*inputs),
        "tf_stitch": lambda: optimized(*inputs),
    }
    latency = interleaved(calls, rounds=rounds, warmup=3)
    ratio = paired_ratio(latency["TensorFlow"], latency["tf_stitch"])
    confirmed = 0
    if confirm_rounds > 0 and unsure(ratio):
        step("confirming the latency")
        ratio = confirm(calls["TensorFlow"], calls["tf_stitch"], confirm_rounds)
        confirmed = confirm_rounds
    gpu_detail = report.tf_stitch_gpu_detail
    return Measurement(
        kernels={key: {**kernels, **gpu_counts}[key] for key in KERNEL_COLUMNS},
        latency=latency,
        optimize_s=optimize_s,
        max_abs_error=error,
        outputs_match=match,
        stitched_kernels=len(optimized.kernels),
        gpu_by_type=dict(gpu_detail.by_type) if gpu_detail else {},
        notes=notes,
        tf_self_error=tf_self_error,
        ratio=ratio,
        confirm_rounds=confirmed,
    )
