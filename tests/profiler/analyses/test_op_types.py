"""Op types by count and time."""

from __future__ import annotations

import pandas as pd
import pytest

from tf_stitch.profiler.analyses.op_types import op_type_distribution
from tf_stitch.profiler.store.profile import Profile


def test_hand_made_table() -> None:
    table = pd.DataFrame(
        {
            "name": ["a", "b", "c"],
            "type": ["MatMul", "MatMul", "Relu"],
            "calls_per_step": [1.0, 2.0, 1.0],
            "corrected_ns": [3e6, 1e6, 1e6],
        }
    )
    out = op_type_distribution(table).set_index("type")
    assert out.loc["MatMul"].tolist() == [2, 3.0, 4.0, pytest.approx(0.8)]
    assert out.loc["Relu", "time_share"] == pytest.approx(0.2)


def test_recorded_profile(recorded: Profile) -> None:
    out = op_type_distribution(recorded.table("op"))
    assert out.type.iloc[0] == "_FusedConv2D"
    by_type = out.set_index("type")
    assert by_type.loc["ReadVariableOp", "ops"] == 10
    assert by_type.loc["Mul", "ops"] == 3
    assert by_type.time_share.sum() == pytest.approx(1.0)
