"""Counting the TensorFlow ops (kernel launches) one call of a function executes, from a trace.

The function is called a few times under the TensorFlow profiler, each call inside a step
marker. Every op the TF executor runs leaves a host event named `node_name:OpType`, and every op
executed eagerly an `EagerExecute` event naming it (`profiler/trace/op_events.py` reads them).
Both are counted per step.
"""

from __future__ import annotations

import inspect
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf

from tf_stitch.profiler.measure.fresh_executor import fresh_instantiations
from tf_stitch.profiler.trace.op_events import NO_KERNEL_OPS, OpRun, op_run_of
from tf_stitch.profiler.trace.xplane import StepInterval, TraceEvent, host_events, step_intervals

STEP_MARKER = "step"
PROFILER_OPTIONS = dict(host_tracer_level=2, python_tracer_level=0, device_tracer_level=0)


@dataclass(frozen=True)
class OpLaunches:
    """Op launches per step of a traced function.

    `per_step` is the count of the most common step (equal to min and max when every step
    launched the same ops); `by_type` and `excluded_by_type` describe that step, and `runs`
    lists its kernel-launching ops by node (how many times each ran in the step).
    """

    per_step: int
    min_per_step: int
    max_per_step: int
    by_type: dict[str, int] = field(default_factory=dict)
    excluded_by_type: dict[str, int] = field(default_factory=dict)
    runs: dict[OpRun, int] = field(default_factory=dict)

    @property
    def consistent(self) -> bool:
        """Whether every traced step launched the same number of ops."""
        return self.min_per_step == self.max_per_step


def count_ops_per_step(
    events: Iterable[TraceEvent], steps: Sequence[StepInterval]
) -> list[Counter[OpRun]]:
    """For each step, how many times each op ran (op events starting inside its interval)."""
    counts: list[Counter[OpRun]] = [Counter() for _ in steps]
    for ev in events:
        run = op_run_of(ev)
        if run is None:
            continue
        for i, step in enumerate(steps):
            if step.contains(ev.start_ps):
                counts[i][run] += 1
                break
    return counts


def _by_type(runs: Iterable[tuple[OpRun, int]]) -> dict[str, int]:
    types: Counter[str] = Counter()
    for run, n in runs:
        types[run.op] += n
    return dict(sorted(types.items()))


def summarize_steps(per_step: Sequence[Counter[OpRun]]) -> OpLaunches:
    """Fold per-step op counts into an `OpLaunches`, splitting off `NO_KERNEL_OPS`."""
    if not per_step:
        raise ValueError("no steps to summarize")
    kept = [Counter({k: v for k, v in c.items() if k.op not in NO_KERNEL_OPS}) for c in per_step]
    totals = [c.total() for c in kept]
    mode = Counter(totals).most_common(1)[0][0]
    chosen = totals.index(mode)
    excluded = [(k, v) for k, v in per_step[chosen].items() if k.op in NO_KERNEL_OPS]
    return OpLaunches(
        per_step=mode,
        min_per_step=min(totals),
        max_per_step=max(totals),
        by_type=_by_type(kept[chosen].items()),
        excluded_by_type=_by_type(excluded),
        runs=dict(sorted(kept[chosen].items())),
    )


def _as_graph_callable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Plain Python functions are wrapped in `tf.function`; anything else is used as is."""
    if inspect.isfunction(fn) or inspect.ismethod(fn):
        wrapped: Callable[..., Any] = tf.function(fn)
        return wrapped
    return fn


def _as_args(inputs: Any) -> tuple[Any, ...]:
    """Positional arguments from `inputs`; NumPy arrays become tensors up front."""
    if isinstance(inputs, tf.Tensor | np.ndarray) or not isinstance(inputs, Sequence):
        inputs = (inputs,)

    def convert(v: Any) -> Any:
        return tf.convert_to_tensor(v) if isinstance(v, np.ndarray | np.generic) else v

    return tuple(tf.nest.map_structure(convert, tuple(inputs)))


def _start_profiler(logdir: str) -> None:
    options = tf.profiler.experimental.ProfilerOptions(**PROFILER_OPTIONS)
    try:
        tf.profiler.experimental.start(logdir, options=options)
    except tf.errors.AlreadyExistsError as e:
        raise RuntimeError(
            "a TensorFlow profiler session is already active in this process; only one can "
            "run at a time, so stop it before counting op launches"
        ) from e


def trace_steps(
    fn: Callable[..., Any], args: tuple[Any, ...], steps: int, warmup: int = 0
) -> tuple[list[TraceEvent], list[StepInterval]]:
    """Call `fn(*args)` `warmup` times and then `steps` times, each of those in a step marker,
    all under the profiler and in a fresh instantiation of the functions `fn` calls (see
    `fresh_executor`: an executor that ran untraced stops tracing its cheap ops).

    Returns the host events and the step intervals. The profiler is always stopped and its
    temporary logdir deleted.
    """
    with (
        tempfile.TemporaryDirectory(prefix="tf_stitch_trace_") as logdir,
        fresh_instantiations(),
    ):
        _start_profiler(logdir)
        try:
            for _ in range(warmup):
                fn(*args)
            for i in range(steps):
                with tf.profiler.experimental.Trace(STEP_MARKER, step_num=i, _r=1):
                    fn(*args)
        finally:
            tf.profiler.experimental.stop()
        events = host_events(logdir)
    intervals = step_intervals(events, STEP_MARKER)
    if len(intervals) != steps:
        raise RuntimeError(f"expected {steps} step markers in the trace, found {len(intervals)}")
    return events, intervals


def count_tf_launches(
    fn: Callable[..., Any], inputs: Any, *, steps: int = 3, warmup: int = 2
) -> OpLaunches:
    """Measure how many TensorFlow ops one call `fn(*inputs)` launches, from a profiler trace.

    A plain Python function is wrapped in `tf.function` so its ops run as a graph; a
    `tf.function`, ConcreteFunction or other callable is called as is, its functions
    instantiated anew. `warmup` calls (tracing, Grappler, kernel creation) come first, then
    `steps` calls in step markers, all under the profiler (see `trace_steps`). Ops in
    `NO_KERNEL_OPS` are reported separately. Raises RuntimeError if a profiler session is
    already active.
    """
    if steps < 1 or warmup < 0:
        raise ValueError("need steps >= 1 and warmup >= 0")
    events, intervals = trace_steps(_as_graph_callable(fn), _as_args(inputs), steps, warmup)
    return summarize_steps(count_ops_per_step(events, intervals))
