"""A text progress bar for long commands (one line redrawn on a terminal, a line per step in a
log file), with the elapsed time and an estimate of the time left."""

from __future__ import annotations

import time
from typing import TextIO

WIDTH = 24


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    """`update(done, note)` redraws `label [####....] done/total note · elapsed, ETA`."""

    def __init__(self, total: int, out: TextIO, label: str = "") -> None:
        if total < 1:
            raise ValueError("a progress bar needs total >= 1")
        self.total, self.out, self.label = total, out, label
        self.started = time.perf_counter()
        self.interactive = bool(getattr(out, "isatty", lambda: False)())

    def update(self, done: int, note: str = "") -> None:
        done = min(max(done, 0), self.total)
        elapsed = time.perf_counter() - self.started
        filled = WIDTH * done // self.total
        timing = _clock(elapsed)
        if 0 < done < self.total:
            timing += f", about {_clock(elapsed / done * (self.total - done))} left"
        line = f"{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] {done}/{self.total}"
        line = f"{line} {note} · {timing}" if note else f"{line} · {timing}"
        if self.interactive:
            end = "\n" if done == self.total else ""
            print(f"\r\033[K{line}", end=end, file=self.out, flush=True)
        else:
            print(line, file=self.out, flush=True)

    def __call__(self, done: int, total: int) -> None:
        """The `progress(done, total)` callback `profiler.measure.timing.interleaved` takes."""
        self.total = max(total, 1)
        self.update(done)
