"""Model latency and throughput across batch sizes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

BATCH_COLUMNS = ["model", "batch", "latency_ms", "throughput_per_s", "latency_per_example_ms"]


def latency_by_batch(metas: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per (model, batch) from profiles' meta: run A's latency, examples per second
    and latency per example; ordered by model then batch."""
    rows = []
    for m in metas:
        latency_ms = float(m["model_latency_ns"]) / 1e6
        batch = int(m["batch"])
        rows.append(
            {
                "model": str(m["model"]),
                "batch": batch,
                "latency_ms": latency_ms,
                "throughput_per_s": batch / (latency_ms / 1e3) if latency_ms > 0 else float("nan"),
                "latency_per_example_ms": latency_ms / batch,
            }
        )
    out = pd.DataFrame(rows, columns=BATCH_COLUMNS)
    return out.sort_values(["model", "batch"], ignore_index=True)
