"""The runs of leveled measurement (XSP): each level is timed in the run where it is the deepest.

- run A, model level: `steps` calls timed with nothing traced;
- run B, op and library level: the TF profiler's host tracer (level 2) with a step marker
  around every call, so the executor's op events and the thread pool's work regions are
  recorded; its xplane files stay in the logdir given (XProf reads them).

`calibrate_event_cost` measures what recording one host trace event costs, so that op and layer
times can be corrected for the events recorded inside them. It is measured directly (events
emitted in a loop in C++ with and without a profiler session), not from step times: a recorded
event costs about 0.1 us here, while steps of a few ms vary by 20% from one block of steps to
the next on a shared 2-vCPU VM, and cheap ops (under 8000 cycles by the executor's running
estimate) are not recorded at all once warm, so no chain of ops gives a measurable difference.
"""

from __future__ import annotations

import functools
import itertools
import statistics
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import tensorflow as tf

from tf_stitch.collector import collector_paused
from tf_stitch.profiler.measure import thread_cpu
from tf_stitch.profiler.measure.fresh_executor import fresh_instantiations
from tf_stitch.profiler.measure.timing import wait_for
from tf_stitch.profiler.trace import gpu_kernels
from tf_stitch.profiler.trace.spans import Span, step_spans
from tf_stitch.profiler.trace.xplane import (
    TraceEvent,
    find_xplane_files,
    host_events,
    is_step_marker,
    profile_start_ns,
    step_intervals,
)
from tf_stitch.runtime import op_library

STEP_MARKER = "tf_stitch_step"
TRIM = 0.2  # the share of iterations a trimmed mean drops (half from each end)
CALIBRATION_EVENTS = 20_000


def trimmed_mean(values: Sequence[float], trim: float = TRIM) -> float:
    """Mean of `values` without the `trim / 2` lowest and highest shares."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    cut = int(len(ordered) * trim / 2)
    kept = ordered[cut : len(ordered) - cut] or ordered
    return sum(kept) / len(kept)


def run_model_level(
    call: Callable[[], Any], steps: int, warmup: int, cpu: list[float] | None = None
) -> list[float]:
    """Run A: wall time (ns) of each of `steps` synchronized calls, nothing traced; the CPU
    time the process spent in each (all its threads: TensorFlow's pools too) is appended to
    `cpu` where given."""
    for _ in range(warmup):
        wait_for(call())
    times = []
    with collector_paused(collect_first=True):
        for _ in range(steps):
            start, used = time.perf_counter_ns(), time.process_time_ns()
            wait_for(call())
            times.append(float(time.perf_counter_ns() - start))
            if cpu is not None:
                cpu.append(float(time.process_time_ns() - used))
    return times


@dataclass
class TracedRun:
    """Run B: per traced step, its wall time under tracing (ns) and its spans."""

    step_ns: list[float]
    steps: list[list[Span]]
    events_per_step: list[int]
    step_start_ps: list[int]  # each step's start in the trace's clock
    trace_origin_ns: int = 0  # the trace clock's zero, in ns since the epoch (0: unknown)
    # Per step, its threads' CPU time against their busy time, by pool (`thread_cpu`); empty
    # where the threads' clocks cannot be read.
    cpu: list[thread_cpu.StepCpu] = field(default_factory=list)


def _start_profiler(logdir: str, level: int) -> None:
    options = tf.profiler.experimental.ProfilerOptions(
        host_tracer_level=level, python_tracer_level=0, device_tracer_level=1
    )
    try:
        tf.profiler.experimental.start(logdir, options=options)
    except tf.errors.AlreadyExistsError as e:
        raise RuntimeError(
            "a TensorFlow profiler session is already active in this process; stop it first"
        ) from e


@dataclass
class _Traced:
    events: list[TraceEvent]
    origin_ns: int
    device: list[tuple[TraceEvent, str]]
    clocks: list[thread_cpu.Reading]  # before each step and after the last; [] if unknown


def _trace(
    call: Callable[[], Any], steps: int, logdir: str, level: int, warmup: int = 0
) -> _Traced:
    clocks = thread_cpu.Clocks()
    readings: list[thread_cpu.Reading | None] = []
    _start_profiler(logdir, level)
    try:
        with collector_paused(collect_first=True):
            for _ in range(warmup):  # traced too: see run_traced
                wait_for(call())
            readings.append(clocks.read())
            for i in range(steps):
                with tf.profiler.experimental.Trace(STEP_MARKER, step_num=i, _r=1):
                    wait_for(call())
                readings.append(clocks.read())
    finally:
        tf.profiler.experimental.stop()
    host = host_events(logdir)
    linked: list[tuple[TraceEvent, str]] = []
    if tf.config.list_physical_devices("GPU"):  # device planes only exist with a GPU
        device, other = gpu_kernels.trace_events(logdir)
        linked = gpu_kernels.link_kernels(device, other)
    known = [r for r in readings if r is not None]
    if len(known) != steps + 1:
        known = []
    return _Traced(host, profile_start_ns(logdir) or 0, linked, known)


def run_traced(
    call: Callable[[], Any],
    steps: int,
    warmup: int,
    logdir: str,
    layer_names: Callable[[str], str] | None = None,
    host_tracer_level: int = 2,
) -> TracedRun:
    """Run B: `steps` calls under the host tracer, each in a step marker; the spans of each.

    The `warmup` calls run under the tracer as well, outside the step markers: an executor's
    untraced runs make its cheap ops untraceable (`fresh_executor`), and a loop of a hundred
    trips does that in one call. Call it in `fresh_executor.fresh_instantiations()` when the
    function has run untraced before (run A)."""
    t = _trace(call, steps, logdir, host_tracer_level, warmup)
    events = t.events
    intervals = step_intervals(events, STEP_MARKER)
    if len(intervals) != steps:
        raise RuntimeError(f"expected {steps} step markers in the trace, found {len(intervals)}")
    spans = [step_spans(events, s, layer_names, t.device) for s in intervals]
    counts = [sum(1 for e in events if s.contains(e.start_ps)) for s in intervals]
    cpu: list[thread_cpu.StepCpu] = []
    if t.clocks:
        caller = next(e.line for e in events if is_step_marker(e, STEP_MARKER))
        host_lines = {e.line for e in events}
        cpu = [
            thread_cpu.attribute(
                step, a, b, threading.get_native_id(), thread_cpu.pool_of(caller), host_lines
            )
            for step, (a, b) in zip(spans, itertools.pairwise(t.clocks), strict=True)
        ]
    return TracedRun(
        [(s.end_ps - s.start_ps) / 1000.0 for s in intervals],
        spans,
        counts,
        [s.start_ps for s in intervals],
        t.origin_ns,
        cpu,
    )


@dataclass
class Blocks:
    """Runs A and B interleaved in blocks (`run_blocks`): every step's time with its block."""

    model_ns: list[float]  # run A's steps, in order
    model_block: list[int]
    model_cpu_ns: list[float]  # the process's CPU time in each of them, every thread's
    traced: TracedRun  # run B's steps, every block's, in order
    traced_block: list[int]
    step_epoch_ns: list[int]  # each traced step's start, ns since the epoch (empty: unknown)
    traces: dict[str, bytes]  # the first block's xplane files (XProf opens them)
    first_block_steps: int
    # The reference's steps (`run_blocks(reference=...)`), timed as run A's are, and blocks.
    reference_ns: list[float] = field(default_factory=list)
    reference_block: list[int] = field(default_factory=list)


def run_blocks(
    call: Callable[[], Any],
    steps: int,
    block: int,
    warmup: int,
    layer_names: Callable[[str], str] | None = None,
    enough: Callable[[Blocks], bool] | None = None,
    deadline: float | None = None,
    reference: Callable[[], Any] | None = None,
) -> Blocks:
    """Run A and run B in alternating blocks of `block` steps (A B A B ...), `steps` of each in
    all, so that the machine's drift hits both alike; then more pairs of blocks until
    `enough(blocks)` or `time.monotonic()` passes `deadline`, where given. Run B's blocks call
    one fresh instantiation (`fresh_instantiations`), always traced, so every op leaves its
    event; each block is one profiler session, whose start and stop are outside its steps.
    A `reference` (another callable, e.g. the same model called its own way) is timed like run
    A in a block of its own before each of run A's (R A B R A B ...): a timing of it that the
    machine's drift hits as it hits the profile's."""
    for _ in range(warmup):
        wait_for(call())
    scope: str | None = None
    out = Blocks([], [], [], TracedRun([], [], [], []), [], [], {}, 0)
    done, k = 0, 0

    def more() -> bool:
        if done < steps:
            return True
        if enough is None or enough(out):
            return False
        return deadline is None or time.monotonic() < deadline

    while more():
        size = min(block, steps - done) if done < steps else block
        # Each block starts with one call it does not time (traced, in run B, outside the step
        # markers): the first call after the other run's block is slower (measured: the
        # profile's latency 10-15% above an untraced timing of the same model without it).
        if reference is not None:
            out.reference_ns += run_model_level(reference, size, 1)
            out.reference_block += [k] * size
        out.model_ns += run_model_level(call, size, 1, out.model_cpu_ns)
        out.model_block += [k] * size
        with (
            fresh_instantiations(scope) as scope,
            tempfile.TemporaryDirectory(prefix="tf_stitch_profile_") as tmp,
        ):
            b = run_traced(call, size, 1, tmp, layer_names)
            if k == 0:
                out.traces = {f.name: f.read_bytes() for f in find_xplane_files(tmp)}
                out.first_block_steps = size
        t = out.traced
        t.step_ns += b.step_ns
        t.steps += b.steps
        t.events_per_step += b.events_per_step
        t.step_start_ps += b.step_start_ps  # each block's own clock
        t.cpu = t.cpu + b.cpu if b.cpu and len(t.cpu) == len(t.step_ns) - len(b.step_ns) else []
        if b.trace_origin_ns:
            out.step_epoch_ns += [b.trace_origin_ns + s // 1000 for s in b.step_start_ps]
        out.traced_block += [k] * size
        done, k = done + size, k + 1
    if len(out.step_epoch_ns) != done:
        out.step_epoch_ns = []
    return out


def block_medians(values: Sequence[float], blocks: Sequence[int]) -> list[float]:
    """Each block's typical value, in block order: the median of its values (a step the
    machine delayed moves its block's mean, not its median)."""
    by: dict[int, list[float]] = {}
    for v, b in zip(values, blocks, strict=True):
        by.setdefault(b, []).append(v)
    return [statistics.median(by[b]) for b in sorted(by)]


@functools.cache
def calibrate_event_cost(events: int = CALIBRATION_EVENTS, repeats: int = 5) -> float:
    """Nanoseconds recording one host trace event adds, measured on this machine: `repeats`
    loops of `events` level-2 events named like op events, inside a profiler session, against
    the same loops with none active (median per loop; the session's first loop, which
    allocates the recorder's blocks, is kept, as a real trace pays that too). 0.0 with a
    warning if the op library that emits the events cannot be loaded. Cached per process."""
    try:
        op_library.load()
    except op_library.OpLibraryBuildError as e:
        warnings.warn(
            f"cannot calibrate the cost of a trace event ({e}); times are not corrected",
            RuntimeWarning,
            stacklevel=2,
        )
        return 0.0
    idle = [op_library.time_trace_events(events) for _ in range(repeats)]
    with tempfile.TemporaryDirectory(prefix="tf_stitch_calibrate_") as logdir:
        _start_profiler(logdir, level=2)
        try:
            recording = [op_library.time_trace_events(events) for _ in range(repeats)]
        finally:
            tf.profiler.experimental.stop()
    idle += [op_library.time_trace_events(events) for _ in range(repeats)]
    return max(0.0, (statistics.median(recording) - statistics.median(idle)) / events)
