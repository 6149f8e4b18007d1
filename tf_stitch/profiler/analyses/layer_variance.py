"""How much each layer's time varies across the traced iterations."""

from __future__ import annotations

import pandas as pd

VARIANCE_COLUMNS = ["name", "steps", "mean_ms", "std_ms", "cv", "min_ms", "max_ms"]


def layer_variance(spans: pd.DataFrame) -> pd.DataFrame:
    """Per layer: its corrected time per step (segments summed) over the steps, as mean,
    standard deviation (ddof 1), coefficient of variation, min and max; most variable (by
    standard deviation) first. A step where the layer did not run counts as 0."""
    layers = spans[(spans.level == "layer") & (spans.type != "framework")]
    steps = sorted(spans.step.unique())
    wide = layers.groupby(["name", "step"]).corrected_ns.sum().unstack("step")
    wide = wide.reindex(columns=steps).fillna(0.0) / 1e6
    out = pd.DataFrame(
        {
            "name": wide.index,
            "steps": len(steps),
            "mean_ms": wide.mean(axis=1).to_numpy(),
            "std_ms": wide.std(axis=1, ddof=1).fillna(0.0).to_numpy(),
            "min_ms": wide.min(axis=1).to_numpy(),
            "max_ms": wide.max(axis=1).to_numpy(),
        }
    )
    out["cv"] = (out.std_ms / out.mean_ms).where(out.mean_ms > 0, 0.0)
    return out.sort_values("std_ms", ascending=False, ignore_index=True)[VARIANCE_COLUMNS]
