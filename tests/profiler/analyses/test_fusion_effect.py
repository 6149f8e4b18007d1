"""Before/after tf_stitch from two profiles."""

from __future__ import annotations

import pytest

from tf_stitch.profiler.analyses.fusion_effect import fusion_effect
from tf_stitch.profiler.store.profile import Profile


def test_before_and_after(recorded: Profile) -> None:
    after = recorded.spans[recorded.spans.type != "Mul"]  # as if its three Muls were fused away
    out = fusion_effect(recorded.spans, recorded.meta, after, {"model_latency_ns": 598157.0})
    assert (out["kernels_before"], out["kernels_after"]) == (13.0, 10.0)
    assert out["kernel_ratio"] == pytest.approx(10 / 13)
    assert out["speedup"] == pytest.approx(2.0)
