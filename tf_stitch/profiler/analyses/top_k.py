"""Top-k layers, ops or kernels by time per step, with their share of the step."""

from __future__ import annotations

import pandas as pd

TOP_COLUMNS = ["rank", "name", "type", "calls_per_step", "ms_per_step", "share"]


def top_k(level_table: pd.DataFrame, k: int = 10) -> pd.DataFrame:
    """The `k` slowest rows of a `Profile.table(level)` (trimmed-mean corrected time per step;
    `share` of the model latency)."""
    if k < 1:
        raise ValueError("k must be at least 1")
    top = level_table.sort_values("corrected_ns", ascending=False).head(k).reset_index(drop=True)
    out = pd.DataFrame(
        {
            "rank": range(1, len(top) + 1),
            "name": top.name,
            "type": top.type,
            "calls_per_step": top.calls_per_step,
            "ms_per_step": top.corrected_ns / 1e6,
            "share": top.share,
        }
    )
    return out[TOP_COLUMNS]
