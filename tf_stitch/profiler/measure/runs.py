"""The runs of one profile: run A alone when no level is traced; else run A's warm-up, the
trace event's cost, runs A and B interleaved in blocks (with a reference beside them where
given), and run C for the kernels of a tf_stitch-optimized graph. `measure` returns what they
measured (`Measured`) and adds the CPU and reference timings to the profile's `meta`."""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tb_plugin.metadata import ProfileMeta
from tf_stitch.graph.variable_writes import ASSIGN_OP, STITCHED_OP
from tf_stitch.profiler.measure import leveled, thread_cpu
from tf_stitch.profiler.measure.fresh_executor import fresh_instantiations
from tf_stitch.profiler.trace.merge import graft_kernels
from tf_stitch.profiler.trace.spans import Span
from tf_stitch.progress import Progress


class ProfileError(RuntimeError):
    """The model failed while it was being profiled; says in which run and level."""


def brief(error: Exception) -> str:
    """The error's message without the Python traceback TensorFlow embeds in graph errors."""
    text = getattr(error, "message", None) or str(error)
    kept = [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.startswith("  File ") and not line.startswith("Detected at")
    ]
    return " ".join(kept) or type(error).__name__


@dataclass
class Measured:
    """Run A's steps with their blocks, and run B's and C's where levels were traced."""

    model_ns: list[float]
    model_block: list[int]
    steps_spans: list[list[Span]] = field(default_factory=list)  # run B's step trees
    traced_block: list[int] = field(default_factory=list)
    traced_blocks: list[float] = field(default_factory=list)  # run B's block medians
    traces: dict[str, bytes] = field(default_factory=dict)  # the first block's xplane files
    first_steps: int = 0  # the steps of that block
    step_start_ps: list[int] = field(default_factory=list)
    epoch_ns: list[int] = field(default_factory=list)
    cost: float = 0.0  # one trace event's cost (ns)
    run_c_ns: float | None = None  # run C's step latency


def _failed(run: str, error: Exception) -> ProfileError:
    return ProfileError(f"the model failed in {run}: {brief(error)}")


def measure(
    call: Callable[[], Any],
    names: Any,
    traced: Sequence[str],
    steps: int,
    warmup: int,
    block: int,
    bar: Progress,
    meta: ProfileMeta,
    enough: Callable[[leveled.Blocks], bool] | None = None,
    deadline: float | None = None,
    reference: Callable[[], Any] | None = None,
) -> Measured:
    """Runs the model for a profile (see the module doc); raises ProfileError naming the run
    where it failed."""
    if not traced:
        bar.update(0, "run A: model level")
        try:
            model_ns = leveled.run_model_level(call, steps, warmup)
        except Exception as e:
            raise _failed("run A (model level)", e) from e
        return Measured(model_ns, [i // block for i in range(steps)])
    bar.update(0, "run A: model level (warm-up)")
    try:  # run A's warm-up, untraced: a model that fails, fails here
        leveled.run_model_level(call, 0, warmup)
    except Exception as e:
        raise _failed("run A (model level)", e) from e
    bar.update(1, "calibrating the cost of a trace event")
    cost = leveled.calibrate_event_cost()
    bar.update(2, f"runs A and B interleaved, blocks of {block} steps")
    try:
        b = leveled.run_blocks(call, steps, block, 0, names, enough, deadline, reference)
    except Exception as e:
        raise _failed("run B (op level)", e) from e
    _note_timings(b, meta)
    m = Measured(
        b.model_ns,
        b.model_block,
        b.traced.steps,
        b.traced_block,
        leveled.block_medians(b.traced.step_ns, b.traced_block),
        b.traces,
        b.first_block_steps,
        b.traced.step_start_ps,
        b.step_epoch_ns,
        cost,
    )
    if "kernel" in traced and _ran_stitched_kernels(m.steps_spans):
        bar.update(3, "run C: kernel level")
        with fresh_instantiations():
            m.run_c_ns = _run_kernel_level(call, len(m.model_ns), names, m.steps_spans)
    return m


def _note_timings(b: leveled.Blocks, meta: ProfileMeta) -> None:
    """The reference's timing, the CPU time beside run A's wall time, the steps measured (more
    where enough blocks were asked for) and the traced threads' CPU time, into `meta`."""
    if b.reference_ns:
        reference_blocks = leveled.block_medians(b.reference_ns, b.reference_block)
        meta["reference_ns"] = statistics.median(reference_blocks)
        meta["reference_blocks_ns"] = reference_blocks
    meta["model_cpu_ns"] = statistics.median(b.model_cpu_ns)
    meta["cpu_per_wall"] = statistics.median(
        c / w for c, w in zip(b.model_cpu_ns, b.model_ns, strict=True) if w > 0
    )
    meta["steps"] = len(b.model_ns)
    if b.traced.cpu and len(b.traced.cpu) == len(b.traced.steps):
        meta["thread_cpu"] = thread_cpu.summary(b.traced.cpu)


def _ran_stitched_kernels(steps: list[list[Span]]) -> bool:
    kernels = (STITCHED_OP, ASSIGN_OP)
    return any(s.level == "op" and s.type in kernels for step in steps for s in step)


def _run_kernel_level(
    call: Callable[[], Any], steps: int, names: Any, into: list[list[Span]]
) -> float:
    """Run C: the calls traced again with StitchedKernel's kernel events on; its kernel spans
    are grafted onto run B's ops (by identity). Returns run C's step latency (trimmed mean)."""
    from tf_stitch.runtime import op_library

    op_library.set_kernel_tracing(True)
    try:
        with tempfile.TemporaryDirectory(prefix="tf_stitch_profile_c_") as tmp:
            c = leveled.run_traced(call, steps, warmup=1, logdir=tmp, layer_names=names)
    except Exception as e:
        raise _failed("run C (kernel level)", e) from e
    finally:
        op_library.set_kernel_tracing(False)
    for step in c.steps:
        for s in step:
            s.run = "C"
    graft_kernels(into, c.steps)
    return leveled.trimmed_mean(c.step_ns)
