"""Roofline on the recorded profile under given peaks."""

from __future__ import annotations

import pytest

from tests.profiler.analyses.conftest import PREFIX
from tf_stitch.profiler.analyses.flops import executed_costs, executed_types
from tf_stitch.profiler.analyses.roofline import layer_roofline, op_roofline, ridge_point
from tf_stitch.profiler.store.profile import Profile

PEAKS = {"flops_per_s": 1e11, "bytes_per_s": 2e10}  # ridge at 5 FLOP/byte


def _roof(p: Profile):  # type: ignore[no-untyped-def]
    ops = p.spans[p.spans.level == "op"]
    return op_roofline(ops, executed_costs(p.ops, executed_types(ops)), PEAKS)


def test_ridge_point() -> None:
    assert ridge_point(PEAKS) == 5.0


def test_ops_are_classified_by_intensity_against_the_ridge(recorded: Profile) -> None:
    roof = _roof(recorded).set_index("name")
    conv = roof.loc[PREFIX + "conv_1/BiasAdd"]
    assert conv.intensity == pytest.approx(86240 / 12864)  # 6.70 > 5
    assert conv.bound == "compute"
    assert conv.attainable_gflops == pytest.approx(100.0)
    assert conv.ms_per_step == pytest.approx(0.124731, abs=1e-6)  # traced, 4 steps recorded
    assert conv.achieved_gflops == pytest.approx(86240 / 0.124731e-3 / 1e9, rel=1e-5)
    dw = roof.loc[PREFIX + "dw_1/depthwise"]
    assert dw.bound == "memory"
    assert dw.attainable_gflops == pytest.approx(20736 / 11024 * 20.0)
    assert roof.loc[PREFIX + "bn_1/Cast/ReadVariableOp"].bound == "none"
    assert (roof.bound == "compute").sum() == 1
    assert roof.ms_per_step.is_monotonic_decreasing


def test_layers_sum_their_ops(recorded: Profile) -> None:
    layers = layer_roofline(recorded.spans, _roof(recorded), PEAKS).set_index("name")
    dw = layers.loc["dw"]  # depthwise conv + its BiasAdd
    assert (dw.flops, dw.bytes) == (20736 + 1152, 11024 + 9232)
    assert dw.bound == "memory"
    assert layers.loc["conv"].bound == "compute"
    assert set(layers.index) == {"conv", "bn", "relu", "dw", "gap", "dense"}
