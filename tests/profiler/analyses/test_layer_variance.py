"""Per-layer variance across iterations."""

from __future__ import annotations

import pandas as pd
import pytest

from tf_stitch.profiler.analyses.layer_variance import layer_variance
from tf_stitch.profiler.store.profile import COLUMNS, Profile


def _spans(rows: list[tuple[int, str, str, float]]) -> pd.DataFrame:
    full = []
    for i, (step, level, name, ns) in enumerate(rows):
        full.append(
            {c: 0 for c in COLUMNS}
            | {
                "step": step,
                "id": i,
                "level": level,
                "name": name,
                "type": level,
                "corrected_ns": ns,
            }
        )
    return pd.DataFrame(full, columns=COLUMNS)


def test_segments_add_up_and_missing_steps_count_as_zero() -> None:
    spans = _spans(
        [
            (0, "model", "m", 0),
            (0, "layer", "a", 1e6),
            (0, "layer", "a", 1e6),
            (0, "layer", "b", 5e6),
            (1, "model", "m", 0),
            (1, "layer", "a", 4e6),
            (1, "layer", "b", 5e6),
            (2, "model", "m", 0),
            (2, "layer", "b", 5e6),
        ]
    )
    out = layer_variance(spans).set_index("name")
    assert out.loc["a"].tolist()[:2] == [3, 2.0]  # steps, mean of 2, 4, 0
    assert out.loc["a", "std_ms"] == pytest.approx(2.0)
    assert out.loc["a", "cv"] == pytest.approx(1.0)
    assert (out.loc["a", "min_ms"], out.loc["a", "max_ms"]) == (0.0, 4.0)
    assert out.loc["b", "std_ms"] == 0.0
    assert list(out.index) == ["a", "b"]


def test_recorded_profile(recorded: Profile) -> None:
    out = layer_variance(recorded.spans)
    assert (out.steps == 4).all()
    conv = out.set_index("name").loc["conv"]
    assert conv.mean_ms == pytest.approx(0.121574, abs=1e-6)
    assert conv.max_ms == pytest.approx(0.272306, abs=1e-6)
    assert "(framework: call)" not in set(out.name)
