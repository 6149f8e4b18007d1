"""Roofline: each op's (and layer's) arithmetic intensity, achieved FLOP/s and the attainable
FLOP/s under the machine's measured peaks, and whether it is memory- or compute-bound.

An op is memory-bound when its intensity (FLOPs per byte) is below the ridge point, peak FLOP/s
over peak bytes/s (Williams et al., 2009); an op with no FLOPs that moves data is memory-bound,
one that does neither (a variable read) is `none`, one with unknown shapes `unknown`.
Times are per step, averaged over the traced steps, and are the ops' traced durations (`raw_ns`):
the per-event tracing correction is an average that can exceed a microsecond-long op's whole
duration (it would put such ops above the roof), while an op's own trace event costs it little.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

ROOF_COLUMNS = [
    "name",
    "type",
    "calls_per_step",
    "ms_per_step",
    "flops",
    "bytes",
    "intensity",
    "achieved_gflops",
    "attainable_gflops",
    "share_of_roof",
    "bound",
]


def ridge_point(peaks: Mapping[str, Any]) -> float:
    """FLOPs per byte at which the two roofs meet."""
    return float(peaks["flops_per_s"]) / float(peaks["bytes_per_s"])


def _classify(frame: pd.DataFrame, peaks: Mapping[str, Any]) -> pd.DataFrame:
    flops, moved = frame.flops.to_numpy(float), frame.bytes.to_numpy(float)
    seconds = frame.ms_per_step.to_numpy(float) / 1e3
    with np.errstate(divide="ignore", invalid="ignore"):
        intensity = np.where(moved > 0, flops / moved, np.nan)
        achieved = np.where(seconds > 0, flops / seconds, np.nan)
    attainable = np.minimum(float(peaks["flops_per_s"]), intensity * float(peaks["bytes_per_s"]))
    attainable = np.where(flops > 0, attainable, np.nan)
    ridge = ridge_point(peaks)
    out = frame.copy()
    out["intensity"] = intensity
    out["achieved_gflops"] = achieved / 1e9
    out["attainable_gflops"] = attainable / 1e9
    with np.errstate(divide="ignore", invalid="ignore"):
        out["share_of_roof"] = achieved / attainable
    bound = np.where(
        np.isnan(intensity), "unknown", np.where(intensity < ridge, "memory", "compute")
    )
    bound = np.where((flops == 0) & (moved > 0), "memory", bound)
    out["bound"] = np.where((flops == 0) & (moved == 0), "none", bound)
    return out[ROOF_COLUMNS]


def op_roofline(
    op_spans: pd.DataFrame, costs: pd.DataFrame, peaks: Mapping[str, Any]
) -> pd.DataFrame:
    """One row per op that ran (by node name): calls and ms per step (traced times, mean over
    steps), FLOPs and bytes per step (`flops.executed_costs` times calls), intensity, achieved
    and attainable GFLOP/s, and the bound; slowest first."""
    steps = max(op_spans.step.nunique(), 1)
    runs = op_spans.groupby(["name", "type"]).agg(calls=("id", "size"), ns=("raw_ns", "sum"))
    runs = runs.reset_index()
    runs["calls_per_step"] = runs.calls / steps
    runs["ms_per_step"] = runs.ns / steps / 1e6
    cost = costs.set_index("name")[["flops", "bytes"]]
    runs = runs.join(cost, on="name")
    runs["flops"] = runs.flops * runs.calls_per_step
    runs["bytes"] = runs.bytes * runs.calls_per_step
    return _classify(runs, peaks).sort_values("ms_per_step", ascending=False, ignore_index=True)


def layer_roofline(
    spans: pd.DataFrame, ops_roof: pd.DataFrame, peaks: Mapping[str, Any]
) -> pd.DataFrame:
    """The same per layer: the FLOPs, bytes and op time of the ops each layer ran."""
    layers = spans[spans.level == "layer"][["step", "id", "name"]].rename(
        columns={"id": "parent", "name": "layer"}
    )
    op_spans = spans[spans.level == "op"][["step", "parent", "name"]]
    owner = op_spans.merge(layers, on=["step", "parent"]).groupby("name").layer.first()
    frame = ops_roof.assign(layer=ops_roof.name.map(owner)).dropna(subset=["layer"])
    grouped = frame.groupby("layer").agg(
        calls_per_step=("calls_per_step", "sum"),
        ms_per_step=("ms_per_step", "sum"),
        flops=("flops", lambda s: float(np.nansum(s))),
        bytes=("bytes", lambda s: float(np.nansum(s))),
    )
    grouped = grouped.reset_index().rename(columns={"layer": "name"})
    grouped["type"] = "layer"
    return _classify(grouped, peaks).sort_values("ms_per_step", ascending=False, ignore_index=True)
