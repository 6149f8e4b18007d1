"""Kernels per layer and by name."""

from __future__ import annotations

import pandas as pd
import pytest

from tf_stitch.profiler.analyses.kernels import (
    kernels_by_name,
    kernels_per_layer,
    launches_per_step,
)
from tf_stitch.profiler.store.profile import COLUMNS, Profile


def _tree() -> pd.DataFrame:
    """Two steps of: layer L1 (ops: a MatMul, a ReadVariableOp, a StitchedKernel running
    kernels k1 and k2), layer L2 (one Relu)."""
    rows = []
    for step in (0, 1):
        spans = [
            ("model", "m", "step", -1, 10e6),
            ("layer", "L1", "layer", 0, 6e6),
            ("layer", "L2", "layer", 0, 1e6),
            ("op", "mm", "MatMul", 1, 2e6),
            ("op", "w", "ReadVariableOp", 1, 0.1e6),
            ("op", "sk", "StitchedKernel", 1, 3e6),
            ("kernel", "k1", "kernel", 5, 1e6 * (step + 1)),
            ("kernel", "k2", "kernel", 5, 1e6),
            ("op", "r", "Relu", 2, 1e6),
        ]
        for i, (level, name, kind, parent, ns) in enumerate(spans):
            rows.append(
                {c: 0 for c in COLUMNS}
                | {
                    "step": step,
                    "id": i,
                    "parent": parent,
                    "level": level,
                    "name": name,
                    "type": kind,
                    "corrected_ns": ns,
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def test_launches_exclude_ops_without_kernels() -> None:
    assert launches_per_step(_tree()) == 3.0


def test_kernels_per_layer() -> None:
    out = kernels_per_layer(_tree()).set_index("layer")
    assert out.loc["L1"].tolist() == [2.0, 2.0, pytest.approx(2.5)]
    assert out.loc["L2"].tolist() == [1.0, 0.0, 0.0]


def test_kernels_by_name() -> None:
    out = kernels_by_name(_tree(), model_latency_ns=10e6).set_index("name")
    assert out.loc["k1"].tolist() == [1.0, 1.5, 1500.0, pytest.approx(0.15)]
    assert list(out.index) == ["k1", "k2"]


def test_recorded_cpu_profile_has_launches_but_no_kernels(recorded: Profile) -> None:
    assert launches_per_step(recorded.spans) == 13.0
    assert kernels_by_name(recorded.spans, recorded.model_latency_ns).empty
    per_layer = kernels_per_layer(recorded.spans).set_index("layer")
    assert per_layer.loc["bn", "launches_per_step"] == 7.0
    assert per_layer.kernels_per_step.sum() == 0.0
