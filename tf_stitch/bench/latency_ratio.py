"""Is the optimized function slower than TensorFlow's, or only noisy? The ratio of their times
taken round by round, with a confidence interval, and a longer look where it is unsure.

A benchmark's rounds call TensorFlow's function and the optimized one back to back, so the two
times of one round saw the same machine; their ratio cancels the drift that spreads each one's
own times (on a shared VM, 0.7x-1.5x of the median). The median of the per-round ratios, with
its 95% bootstrap interval (`profiler/measure/stability.estimate`), is the figure judged against a
target. Where that median is above the target but the interval reaches below it, the difference
is within the noise of the rounds taken: `confirm` measures the two alone, alternating which
goes first, for more rounds, and its estimate replaces the first.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tf_stitch.profiler.measure.stability import Estimate, estimate
from tf_stitch.profiler.measure.timing import Latency, wait_for

RATIO_TARGET = 1.03  # the optimized function may be this much slower: the noise of a median


def paired_ratio(base: Latency, candidate: Latency) -> Estimate:
    """The median of candidate/base over rounds measured together, with its interval."""
    if not base.times_ms or len(base.times_ms) != len(candidate.times_ms):
        raise ValueError("paired_ratio needs the per-round times of one interleaved run")
    return estimate([c / b for b, c in zip(base.times_ms, candidate.times_ms, strict=True)])


def unsure(ratio: Estimate, target: float = RATIO_TARGET) -> bool:
    """Above the target, but not by more than the interval: more rounds can tell."""
    return ratio.value > target and ratio.low <= target


def confirm(
    base: Callable[[], Any], candidate: Callable[[], Any], rounds: int, warmup: int = 2
) -> Estimate:
    """candidate/base over `rounds` rounds of the two alone, which one goes first alternating
    (a call right after another may find the caches warm or the core's clock raised)."""
    ratios: list[float] = []
    for r in range(warmup + rounds):
        pair = [base, candidate] if r % 2 == 0 else [candidate, base]
        times: list[float] = []
        for fn in pair:
            start = time.perf_counter()
            wait_for(fn())
            times.append(time.perf_counter() - start)
        if r >= warmup:
            b, c = times if r % 2 == 0 else times[::-1]
            ratios.append(c / b)
    return estimate(ratios)
