"""Layer types by count and time."""

from __future__ import annotations

import pandas as pd
import pytest

from tf_stitch.profiler.analyses.type_distribution import type_distribution
from tf_stitch.profiler.store.profile import Profile


def test_recorded_profile_types(recorded: Profile) -> None:
    dist = type_distribution(recorded.table("layer"), recorded.meta["layer_types"])
    by_type = dist.set_index("type")
    assert list(dist.type[:3]) == ["(framework)", "Conv2D", "DepthwiseConv2D"]
    assert by_type.loc["(framework)", "layers"] == 2
    assert by_type.count_share.sum() == pytest.approx(1.0)
    assert by_type.time_share.sum() == pytest.approx(1.0)
    assert by_type.loc["Conv2D", "ms_per_step"] == pytest.approx(0.121574, abs=1e-6)


def test_hand_made_table() -> None:
    table = pd.DataFrame(
        {
            "name": ["dense_1", "dense_2", "attn", "(framework: call)"],
            "type": ["layer", "layer", "layer", "framework"],
            "calls_per_step": [1.0, 1.0, 2.0, 1.0],
            "corrected_ns": [3e6, 1e6, 4e6, 2e6],
        }
    )
    dist = type_distribution(table, {"attn": "MultiHeadAttention"}).set_index("type")
    # Names without a Keras class fall back to the name without its number.
    assert dist.loc["dense"].tolist()[:3] == [2, 2.0, 4.0]
    assert dist.loc["MultiHeadAttention", "time_share"] == pytest.approx(0.4)
    assert dist.loc["(framework)", "count_share"] == pytest.approx(0.25)
