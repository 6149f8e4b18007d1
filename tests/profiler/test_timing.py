"""interleaved(): every function once per round, medians with min and max."""

from __future__ import annotations

import time

from tf_stitch.profiler.measure.timing import interleaved


def test_calls_interleave_and_report_order_statistics() -> None:
    calls: list[str] = []

    def make(name: str, seconds: float):  # type: ignore[no-untyped-def]
        def fn() -> None:
            calls.append(name)
            time.sleep(seconds)

        return fn

    progress: list[tuple[int, int]] = []
    result = interleaved(
        {"a": make("a", 0.002), "b": make("b", 0.0)},
        rounds=4,
        warmup=1,
        progress=lambda done, total: progress.append((done, total)),
    )
    assert calls == ["a", "b"] * 5
    assert progress[-1] == (5, 5)
    a, b = result["a"], result["b"]
    assert a.samples == b.samples == 4
    assert a.min_ms <= a.median_ms <= a.max_ms
    assert a.median_ms >= 2.0 > b.median_ms
    assert "ms (" in str(a)
