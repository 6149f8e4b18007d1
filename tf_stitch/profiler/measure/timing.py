"""Latency of several callables measured interleaved in one run (so drift hits all alike)."""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Latency:
    median_ms: float
    min_ms: float
    max_ms: float
    samples: int
    # Each round's time, in order (rounds of one `interleaved` run pair up across callables).
    times_ms: tuple[float, ...] = ()

    def __str__(self) -> str:
        return f"{self.median_ms:.2f} ms ({self.min_ms:.2f}-{self.max_ms:.2f})"


@functools.cache
def _has_accelerator() -> bool:
    import tensorflow as tf

    return bool(tf.config.list_logical_devices("GPU"))


def wait_for(result: Any) -> None:
    """Waits until the call's work is done. Eager CPU execution is synchronous, so on a CPU-only
    machine this does nothing (reading the values back, `.numpy()`, would copy the result and
    add that copy's time to every measurement); with a GPU it synchronizes the devices."""
    if _has_accelerator():
        import tensorflow as tf

        tf.test.experimental.sync_devices()


def interleaved(
    fns: Mapping[str, Callable[[], Any]],
    rounds: int = 10,
    warmup: int = 2,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Latency]:
    """Calls every function once per round, in turn, `rounds` times after `warmup` rounds;
    returns the median, min and max wall time of each."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(warmup + rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            wait_for(fn())
            if r >= warmup:
                samples[name].append((time.perf_counter() - start) * 1e3)
        if progress is not None:
            progress(r + 1, warmup + rounds)
    return {
        name: Latency(statistics.median(s), min(s), max(s), len(s), tuple(s))
        for name, s in samples.items()
    }
