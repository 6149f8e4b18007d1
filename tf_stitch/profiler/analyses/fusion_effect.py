"""The effect of `tf_stitch.optimize` on a model: kernels per step and latency before and
after, from the profile of the model and the profile of its optimized graph."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from tf_stitch.profiler.analyses.kernels import launches_per_step


def fusion_effect(
    before_spans: pd.DataFrame,
    before_meta: Mapping[str, Any],
    after_spans: pd.DataFrame,
    after_meta: Mapping[str, Any],
) -> dict[str, float]:
    """Launches per step (traced runs) and run A's latency, before and after, with ratios."""
    k0, k1 = launches_per_step(before_spans), launches_per_step(after_spans)
    t0 = float(before_meta["model_latency_ns"]) / 1e6
    t1 = float(after_meta["model_latency_ns"]) / 1e6
    return {
        "kernels_before": k0,
        "kernels_after": k1,
        "kernel_ratio": k1 / k0 if k0 else float("nan"),
        "latency_before_ms": t0,
        "latency_after_ms": t1,
        "speedup": t0 / t1 if t1 else float("nan"),
    }
