"""CPU time beside wall time: how much of a traced step's busy time its threads were on a CPU.

A traced op's duration is wall time. On a busy machine it includes time its thread waited for a
CPU, and nothing in TensorFlow's trace says how much. This module reads every thread's CPU
clock (Linux per-thread clocks: ns resolution, `clock_gettime` on the thread's clock id) before
and after each traced step, and sets each trace line's CPU time against its busy time:

- A trace line is a thread. TensorFlow names it by the thread's pool (`tf_Compute/<id>`,
  `tf_numa_-1_Eigen/<id>`); its id is not the OS thread id, so lines and threads are matched
  by pool: the step markers' line is the thread that calls the steps; a line's pool is
  matched to the threads whose OS name (`comm`, at most 15 characters) is the pool name's
  start; the pools no thread is named for share the CPU time of the threads named for no pool
  (TensorFlow does not give the intra-op workers an OS name).
- Per step and pool: `cpu` (the threads' CPU time), `busy` (the union of the pool's spans'
  intervals, on each line), and `on_cpu = min(1, cpu / busy)`. A span's CPU time is its wall
  time times its pool's `on_cpu` in that step: an estimate, as the clocks are read between
  steps, not around each op. Below 1, the pool's threads were waiting for a CPU or blocked
  (an op's thread waits for its intra-op work) for that share of their busy time; threads that
  spin between ops use CPU outside any span, which the cap hides.
- The share is below 1 on a quiet machine too (a thread waits for work it handed to another,
  or blocks; pool threads that spin between ops use CPU outside any span, which the cap
  hides), so it is read against the same model on a quiet machine. Measured on a 2-vCPU VM
  (benchmarks/profiler_accuracy.py): ResNet50's threads on a CPU 42-43% of their busy time
  quiet, 27-29% with a busy loop on one core; a 2 ms CNN's 64-67% and 40-46%.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from tf_stitch.profiler.trace.intervals import subtract, union_ns
from tf_stitch.profiler.trace.spans import Span

COMM_LENGTH = 15  # Linux keeps a thread's name to 15 bytes
UNNAMED = "(threads without a pool name)"
_TASKS = "/proc/self/task"


def _clock_id(tid: int) -> int:
    """The clock id of thread `tid`'s CPU clock (the kernel's MAKE_THREAD_CPUCLOCK: the
    scheduler's clock, per thread)."""
    return ((~tid) << 3) | 6


@dataclass(frozen=True)
class Reading:
    """Every thread's CPU clock (ns) at one moment, with the threads' OS names."""

    cpu_ns: Mapping[int, int]
    names: Mapping[int, str]


class Clocks:
    """Reads the process's thread clocks; names are read once per thread. `read()` returns
    None where there are no per-thread clocks (not Linux)."""

    def __init__(self) -> None:
        self._names: dict[int, str] = {}
        self.available = hasattr(time, "clock_gettime") and os.path.isdir(_TASKS)

    def read(self) -> Reading | None:
        if not self.available:
            return None
        cpu: dict[int, int] = {}
        try:
            tids = [int(t) for t in os.listdir(_TASKS)]
        except OSError:
            return None
        for tid in tids:
            try:
                cpu[tid] = int(time.clock_gettime(_clock_id(tid)) * 1e9)
                if tid not in self._names:
                    with open(f"{_TASKS}/{tid}/comm") as f:
                        self._names[tid] = f.read().strip()
            except OSError:  # the thread ended
                cpu.pop(tid, None)
        return Reading(cpu, {t: self._names[t] for t in cpu})


def used(start: Reading, end: Reading) -> dict[int, int]:
    """CPU time (ns) each thread used between two readings (threads in both)."""
    return {t: max(0, end.cpu_ns[t] - c) for t, c in start.cpu_ns.items() if t in end.cpu_ns}


def pool_of(line: str) -> str:
    """A trace line's pool: its name without the `/<id>` TensorFlow appends."""
    head, _, tail = line.rpartition("/")
    return head if head and tail.lstrip("-").isdigit() else line


def pool_cpu(
    cpu: Mapping[int, int],
    names: Mapping[int, str],
    pools: Iterable[str],
    caller_tid: int,
    caller: str,
) -> dict[str, int]:
    """CPU time per pool key (see the module doc): `caller` (the step markers' pool) gets the
    calling thread's; a named pool its threads'; `UNNAMED` the rest, for the unmatched pools."""
    out: dict[str, int] = {}
    named = sorted({p for p in pools if p != caller})  # once, not per thread
    for tid, ns in cpu.items():
        if tid == caller_tid:
            key = caller
        else:
            name = names.get(tid, "")
            key = next((p for p in named if name and p[:COMM_LENGTH] == name), UNNAMED)
        out[key] = out.get(key, 0) + ns
    return out


def key_of(pool: str, keys: Collection[str], caller: str) -> str:
    """The key a pool's CPU time is under in `pool_cpu`'s result."""
    return pool if pool == caller or pool in keys else UNNAMED


@dataclass
class StepCpu:
    """One step's pools: CPU time, busy time and their ratio (capped at 1)."""

    cpu_ns: dict[str, float]
    busy_ns: dict[str, float]

    def on_cpu(self, key: str) -> float | None:
        busy = self.busy_ns.get(key, 0.0)
        if busy <= 0.0:
            return None
        return min(1.0, self.cpu_ns.get(key, 0.0) / busy)


CPU_LEVELS = ("op", "library", "kernel")  # the levels whose spans run on a host thread


def attribute(
    spans: list[Span],
    before: Reading,
    after: Reading,
    caller_tid: int,
    caller: str,
    host_lines: set[str],
) -> StepCpu:
    """Sets `cpu_ns` of one step's spans that ran on a host thread, from the thread clocks
    read before and after the step; returns its pools.

    A span's own time is its interval less its library work's (while an op's intra-op work
    runs, its thread waits for it); its CPU time is its own time times its pool's on-CPU
    share, plus its library work's CPU time: an op's CPU time counts every thread it used."""
    on_thread = [i for i, s in enumerate(spans) if s.level in CPU_LEVELS and s.thread in host_lines]
    holes: dict[int, list[tuple[float, float]]] = {}
    for i in on_thread:
        if spans[i].level == "library" and spans[i].parent >= 0:
            holes.setdefault(spans[i].parent, []).append((spans[i].start_ns, spans[i].end_ns))
    own = {i: subtract(spans[i].start_ns, spans[i].end_ns, holes.get(i, [])) for i in on_thread}
    step, keys = step_cpu(
        [(spans[i].thread, a, b) for i in on_thread for a, b in own[i]],
        used(before, after),
        after.names,
        caller_tid,
        caller,
    )
    for i in on_thread:
        s = spans[i]
        share = step.on_cpu(keys[s.thread]) if own[i] else 0.0
        s.cpu_ns = None if share is None else share * sum(b - a for a, b in own[i])
    for i in sorted(on_thread, reverse=True):  # children after parents: add theirs upwards
        s = spans[i]
        if s.level == "library" and s.parent in own and s.cpu_ns is not None:
            parent = spans[s.parent]
            if parent.cpu_ns is not None:
                parent.cpu_ns += s.cpu_ns
    return step


def step_cpu(
    spans: Sequence[tuple[str, float, float]],
    cpu: Mapping[int, int],
    names: Mapping[int, str],
    caller_tid: int,
    caller: str,
) -> tuple[StepCpu, dict[str, str]]:
    """One step's `StepCpu` from its spans `(line, start_ns, end_ns)` (those run on a thread)
    and its threads' CPU times; also each line's pool key."""
    pools = {pool_of(line) for line, _, _ in spans}
    by_key = pool_cpu(cpu, names, pools, caller_tid, caller)
    keys = {line: key_of(pool_of(line), by_key, caller) for line in {s[0] for s in spans}}
    per_line: dict[str, list[tuple[float, float]]] = {}
    for line, start, end in spans:
        per_line.setdefault(line, []).append((start, end))
    busy: dict[str, float] = {}
    for line, intervals in per_line.items():
        busy[keys[line]] = busy.get(keys[line], 0.0) + union_ns(intervals)
    return StepCpu({k: float(v) for k, v in by_key.items()}, busy), keys


def summary(steps: Sequence[StepCpu]) -> dict[str, dict[str, float]]:
    """Per pool, over the steps where it was busy: median busy and CPU time (ns) and median
    `on_cpu`; and `"all"`: the share of all pools' busy time spent on a CPU, median over steps."""
    out: dict[str, dict[str, float]] = {}
    keys = sorted({k for s in steps for k in s.busy_ns})
    for key in keys:
        busy = [s for s in steps if s.busy_ns.get(key, 0.0) > 0.0]
        out[key] = {
            "busy_ns": statistics.median(s.busy_ns[key] for s in busy),
            "cpu_ns": statistics.median(s.cpu_ns.get(key, 0.0) for s in busy),
            "on_cpu": statistics.median(s.on_cpu(key) or 0.0 for s in busy),
        }
    shares = []
    for s in steps:
        busy_all = sum(s.busy_ns.values())
        if busy_all > 0:
            on = sum(min(s.cpu_ns.get(k, 0.0), b) for k, b in s.busy_ns.items())
            shares.append(on / busy_all)
    if shares:
        out["all"] = {"on_cpu": statistics.median(shares)}
    return out
