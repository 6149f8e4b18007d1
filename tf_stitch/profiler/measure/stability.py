"""How far a leveled profile's numbers can be trusted: confidence intervals over blocks, and
what the machine did meanwhile.

The levels are measured in interleaved blocks (run A's untraced steps, then run B's traced
ones, A, B, ...: `leveled.run_blocks`), so that a machine's drift, which on a shared VM is as
large as the effects measured, hits every level alike. Each block gives one value per level
(its steps' mean); a quantity compared across levels (an overhead, the layers' sum against the
step) is taken within each pair of adjacent blocks, where the drift cancels. A 95% bootstrap
interval over the blocks says how precisely that is known. A profile is *unstable* when an
interval is wider than `UNSTABLE_HALF_WIDTH` of the value, when the blocks drift more than
`UNSTABLE_DRIFT` from first to last, or when other processes or the hypervisor (CPU steal)
took more than `BUSY_SHARE` of a CPU while it ran; then it says so instead of reporting a
number as if it were exact.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
UNSTABLE_HALF_WIDTH = 0.05  # of the value
UNSTABLE_DRIFT = 0.10  # last blocks against first, relative
BUSY_SHARE = 0.25  # of one CPU, taken by other processes or stolen


@dataclass(frozen=True)
class Estimate:
    """A value over blocks: their median, and the 95% bootstrap interval of that median."""

    value: float
    low: float
    high: float
    blocks: int

    @property
    def half_width(self) -> float:
        """Half the interval's width, relative to the value (inf for a value of 0)."""
        return (self.high - self.low) / 2 / abs(self.value) if self.value else float("inf")

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high


def estimate(per_block: Sequence[float], seed: int = 0) -> Estimate:
    """The median of `per_block` with its 95% percentile-bootstrap interval (resampling blocks;
    deterministic for a given seed)."""
    values = np.asarray(list(per_block), dtype=float)
    if values.size == 0:
        raise ValueError("no blocks")
    median = float(np.median(values))
    if values.size == 1:
        return Estimate(median, median, median, 1)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, values.size, size=(BOOTSTRAP_RESAMPLES, values.size))
    medians = np.median(values[picks], axis=1)
    tail = (1.0 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(medians, [tail, 100 - tail])
    return Estimate(median, float(low), float(high), int(values.size))


@dataclass(frozen=True)
class CpuSample:
    """Cumulative CPU times (seconds) of the whole machine and of this process."""

    busy: float  # every CPU's non-idle time, steal included
    steal: float
    own: float
    wall: float


def cpu_sample() -> CpuSample | None:
    """Now's counters from /proc (None where there is no /proc)."""
    try:
        with open("/proc/stat") as f:
            fields = [float(v) for v in f.readline().split()[1:]]
        with open("/proc/self/stat") as f:
            own_fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, ValueError, IndexError):
        return None
    tick = float(os.sysconf("SC_CLK_TCK"))
    # user nice system idle iowait irq softirq steal (guest time is inside user already)
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    steal = fields[7] if len(fields) > 7 else 0.0
    busy = sum(fields[:8]) - idle
    own = float(own_fields[11]) + float(own_fields[12])  # utime, stime
    return CpuSample(busy / tick, steal / tick, own / tick, time.monotonic())


@dataclass(frozen=True)
class Contention:
    """What others took while the profile ran, in CPUs (1.0: one CPU all the time)."""

    others: float  # other processes' CPU time per second
    steal: float  # time the hypervisor gave other guests per second

    @staticmethod
    def between(start: CpuSample | None, end: CpuSample | None) -> Contention | None:
        if start is None or end is None or end.wall <= start.wall:
            return None
        wall = end.wall - start.wall
        steal = (end.steal - start.steal) / wall
        others = max(0.0, (end.busy - start.busy) - (end.own - start.own)) / wall - steal
        return Contention(max(0.0, others), max(0.0, steal))


@dataclass
class Stability:
    """The verdict on a profile: unstable, and why (each reason a sentence)."""

    unstable: bool
    half_width: float  # of the model latency's interval, relative
    drift: float  # the last third of run A's blocks against the first, relative
    contention: Contention | None
    reasons: list[str] = field(default_factory=list)

    def as_meta(self) -> dict[str, object]:
        out = asdict(self)
        out["contention"] = None if self.contention is None else asdict(self.contention)
        return out

    def message(self) -> str:
        if not self.unstable:
            return f"stable: model latency ±{self.half_width:.1%} (95% CI)"
        return (
            f"unstable: model latency ±{self.half_width:.1%} (95% CI); "
            f"{'; '.join(self.reasons)}; rerun with more steps or on a quiet machine"
        )


def drift(per_block: Sequence[float]) -> float:
    """Relative change from the first third of the blocks to the last (0 for under 3)."""
    values = list(per_block)
    if len(values) < 3:
        return 0.0
    third = max(1, len(values) // 3)
    first, last = statistics.fmean(values[:third]), statistics.fmean(values[-third:])
    return last / first - 1.0 if first else 0.0


def judge(
    model: Estimate,
    model_blocks: Sequence[float],
    others: Sequence[Estimate],
    contention: Contention | None,
) -> Stability:
    """Unstable if the model latency's or another estimate's interval is wider than
    UNSTABLE_HALF_WIDTH of it, run A drifted more than UNSTABLE_DRIFT, or the machine was busy."""
    reasons = []
    if model.half_width > UNSTABLE_HALF_WIDTH:
        reasons.append(f"that interval is wider than ±{UNSTABLE_HALF_WIDTH:.0%}")
    wide = [e for e in others if e.half_width > UNSTABLE_HALF_WIDTH]
    if wide:
        worst = max(e.half_width for e in wide)
        reasons.append(f"a traced level's interval is ±{worst:.1%}")
    moved = drift(model_blocks)
    if abs(moved) > UNSTABLE_DRIFT:
        reasons.append(f"run A drifted {moved:+.1%} from its first blocks to its last")
    if contention is not None and contention.others + contention.steal > BUSY_SHARE:
        reasons.append(
            f"other processes took {contention.others:.2f} CPUs and steal "
            f"{contention.steal:.2f} while it ran"
        )
    return Stability(bool(reasons), model.half_width, moved, contention, reasons)
