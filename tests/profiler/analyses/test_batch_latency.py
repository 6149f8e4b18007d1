"""Latency and throughput across batch sizes."""

from __future__ import annotations

import pytest

from tf_stitch.profiler.analyses.batch_latency import latency_by_batch
from tf_stitch.profiler.store.profile import Profile


def test_throughput_from_latency() -> None:
    out = latency_by_batch(
        [
            {"model": "b", "batch": 8, "model_latency_ns": 20e6},
            {"model": "b", "batch": 1, "model_latency_ns": 4e6},
            {"model": "a", "batch": 32, "model_latency_ns": 64e6},
        ]
    )
    assert list(zip(out.model, out.batch, strict=True)) == [("a", 32), ("b", 1), ("b", 8)]
    assert out.throughput_per_s.tolist() == pytest.approx([500.0, 250.0, 400.0])
    assert out.latency_per_example_ms.tolist() == pytest.approx([2.0, 4.0, 2.5])


def test_recorded_profile(recorded: Profile) -> None:
    row = latency_by_batch([recorded.meta]).iloc[0]
    assert (row.batch, row.latency_ms) == (2, pytest.approx(1.196314))
