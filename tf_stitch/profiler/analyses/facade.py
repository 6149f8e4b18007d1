"""`ProfileAnalysis`: every analysis of one profile with the profile's tables wired in (after
Holistic Trace Analysis' `TraceAnalysis`), so that a user asks for the result, not for which
table each function takes:

    a = ProfileAnalysis(tf_stitch.Profile.load(logdir, "resnet50"))
    a.top_k("op", 10); a.layer_types(); a.roofline_ops(peaks); a.fusion_effect(optimized)

The functions stay the analyses' API (each pure, in a file of its own); this only calls them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from tf_stitch.profiler.analyses.flops import executed_costs, executed_types
from tf_stitch.profiler.analyses.fusion_effect import fusion_effect
from tf_stitch.profiler.analyses.kernels import (
    kernels_by_name,
    kernels_per_layer,
    launches_per_step,
)
from tf_stitch.profiler.analyses.layer_variance import layer_variance
from tf_stitch.profiler.analyses.op_types import op_type_distribution
from tf_stitch.profiler.analyses.roofline import layer_roofline, op_roofline
from tf_stitch.profiler.analyses.top_k import top_k
from tf_stitch.profiler.analyses.type_distribution import type_distribution
from tf_stitch.profiler.store.profile import Profile


class ProfileAnalysis:
    """The analyses of `profile` (a `tf_stitch.Profile`), each computed when asked."""

    def __init__(self, profile: Profile) -> None:
        if not isinstance(profile, Profile):
            raise TypeError(f"ProfileAnalysis takes a tf_stitch Profile, got {profile!r}")
        self.profile = profile

    def top_k(self, level: str = "op", k: int = 10) -> pd.DataFrame:
        """The `k` slowest names of `level` (layer, op, library, kernel) and their share."""
        return top_k(self.profile.table(level), k)

    def layer_types(self) -> pd.DataFrame:
        """Layers by type (their Keras class where the profile knows it): count and time."""
        types = self.profile.meta.get("layer_types", {})
        return type_distribution(self.profile.table("layer"), types)

    def op_types(self) -> pd.DataFrame:
        """Ops by type: count and time."""
        return op_type_distribution(self.profile.table("op"))

    def layer_variance(self) -> pd.DataFrame:
        """Each layer's spread over the profiled steps."""
        return layer_variance(self.profile.spans)

    def kernels_per_layer(self) -> pd.DataFrame:
        return kernels_per_layer(self.profile.spans)

    def kernels_by_name(self) -> pd.DataFrame:
        return kernels_by_name(self.profile.spans, self.profile.model_latency_ns)

    def launches_per_step(self) -> float:
        return launches_per_step(self.profile.spans)

    def op_costs(self) -> pd.DataFrame:
        """FLOPs and bytes of the ops that ran (fused ops with what they replaced), from the
        shapes the profile recorded (empty if it recorded none)."""
        return executed_costs(self.profile.ops, executed_types(self._op_spans()))

    def roofline_ops(self, peaks: Mapping[str, Any]) -> pd.DataFrame:
        """Each op against the machine's `peaks` (`profiler/measure/peaks.py`): intensity, achieved
        and attainable FLOP/s, memory- or compute-bound."""
        return op_roofline(self._op_spans(), self.op_costs(), peaks)

    def roofline_layers(self, peaks: Mapping[str, Any]) -> pd.DataFrame:
        return layer_roofline(self.profile.spans, self.roofline_ops(peaks), peaks)

    def fusion_effect(self, after: Profile | ProfileAnalysis) -> dict[str, float]:
        """What changed from this profile to `after` (the same model optimized, say)."""
        other = after.profile if isinstance(after, ProfileAnalysis) else after
        return fusion_effect(self.profile.spans, self.profile.meta, other.spans, other.meta)

    def _op_spans(self) -> pd.DataFrame:
        spans = self.profile.spans
        return spans[spans.level == "op"]
