"""Layer types (the Keras class of each layer) by count and by time."""

from __future__ import annotations

import re
from collections.abc import Mapping

import pandas as pd

FRAMEWORK = "(framework)"
TYPE_COLUMNS = ["type", "layers", "calls_per_step", "ms_per_step", "time_share", "count_share"]


def layer_type(name: str, span_type: str, types: Mapping[str, str]) -> str:
    """A layer's type: its Keras class when known, TensorFlow's own time as `(framework)`,
    else its name without a trailing `_<number>` (name scopes of plain functions)."""
    if span_type == "framework":
        return FRAMEWORK
    return types.get(name) or re.sub(r"_\d+$", "", name)


def type_distribution(layer_table: pd.DataFrame, types: Mapping[str, str]) -> pd.DataFrame:
    """Per layer type: how many layers ran, their calls and time per step, the share of the
    layers' total time and of their count; slowest type first."""
    frame = layer_table.assign(
        kind=[
            layer_type(n, t, types) for n, t in zip(layer_table.name, layer_table.type, strict=True)
        ]
    )
    out = (
        frame.groupby("kind")
        .agg(
            layers=("name", "nunique"),
            calls_per_step=("calls_per_step", "sum"),
            ns=("corrected_ns", "sum"),
        )
        .reset_index()
        .rename(columns={"kind": "type"})
    )
    out["ms_per_step"] = out.ns / 1e6
    total_ns, total_layers = out.ns.sum(), out.layers.sum()
    out["time_share"] = out.ns / total_ns if total_ns > 0 else 0.0
    out["count_share"] = out.layers / total_layers if total_layers > 0 else 0.0
    return out.sort_values("ms_per_step", ascending=False, ignore_index=True)[TYPE_COLUMNS]
