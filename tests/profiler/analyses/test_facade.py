"""ProfileAnalysis: each analysis of one profile, its tables wired in, gives what the analysis
function gives when handed the right table (on the recorded CNN profile)."""

from __future__ import annotations

import pandas as pd
import pytest

import tf_stitch
from tf_stitch.profiler.analyses import (
    ProfileAnalysis,
    executed_costs,
    executed_types,
    kernels_by_name,
    kernels_per_layer,
    launches_per_step,
    layer_roofline,
    layer_variance,
    op_roofline,
    top_k,
    type_distribution,
)
from tf_stitch.profiler.analyses.op_types import op_type_distribution
from tf_stitch.profiler.store.profile import Profile

PEAKS = {"flops_per_s": 1e11, "bytes_per_s": 2e10}


def test_each_analysis_is_the_function_on_the_right_table(recorded: Profile) -> None:
    a = ProfileAnalysis(recorded)
    spans = recorded.spans
    ops = spans[spans.level == "op"]
    costs = executed_costs(recorded.ops, executed_types(ops))
    roof = op_roofline(ops, costs, PEAKS)
    expected = {
        "top_k": (a.top_k("layer", 5), top_k(recorded.table("layer"), 5)),
        "layer_types": (
            a.layer_types(),
            type_distribution(recorded.table("layer"), recorded.meta["layer_types"]),
        ),
        "op_types": (a.op_types(), op_type_distribution(recorded.table("op"))),
        "layer_variance": (a.layer_variance(), layer_variance(spans)),
        "kernels_per_layer": (a.kernels_per_layer(), kernels_per_layer(spans)),
        "kernels_by_name": (
            a.kernels_by_name(),
            kernels_by_name(spans, recorded.model_latency_ns),
        ),
        "op_costs": (a.op_costs(), costs),
        "roofline_ops": (a.roofline_ops(PEAKS), roof),
        "roofline_layers": (a.roofline_layers(PEAKS), layer_roofline(spans, roof, PEAKS)),
    }
    for name, (got, want) in expected.items():
        assert not want.empty or name == "kernels_by_name", name  # each compares something
        pd.testing.assert_frame_equal(got, want, obj=name)
    assert a.launches_per_step() == launches_per_step(spans) > 0
    assert len(a.top_k("op", 3)) == 3


def test_fusion_effect_takes_a_profile_or_its_analysis(recorded: Profile) -> None:
    a = ProfileAnalysis(recorded)
    same = a.fusion_effect(recorded)
    assert same == a.fusion_effect(ProfileAnalysis(recorded))
    assert same["kernel_ratio"] == 1.0 and same["speedup"] == 1.0


def test_it_is_tf_stitch_profile_analysis_and_takes_only_a_profile() -> None:
    assert tf_stitch.ProfileAnalysis is ProfileAnalysis
    with pytest.raises(TypeError, match="takes a tf_stitch Profile"):
        ProfileAnalysis("resnet50")  # type: ignore[arg-type]
