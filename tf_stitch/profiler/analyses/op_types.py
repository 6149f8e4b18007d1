"""Op types (what the executor ran: `MatMul`, `_FusedConv2D`, `StitchedKernel`, ...) by count
and by time."""

from __future__ import annotations

import pandas as pd

OP_TYPE_COLUMNS = ["type", "ops", "calls_per_step", "ms_per_step", "time_share"]


def op_type_distribution(op_table: pd.DataFrame) -> pd.DataFrame:
    """Per op type, from a `Profile.table("op")`: how many distinct ops, their calls and time
    per step and their share of the ops' time; slowest type first."""
    out = (
        op_table.groupby("type")
        .agg(
            ops=("name", "nunique"),
            calls_per_step=("calls_per_step", "sum"),
            ns=("corrected_ns", "sum"),
        )
        .reset_index()
    )
    out["ms_per_step"] = out.ns / 1e6
    total = out.ns.sum()
    out["time_share"] = out.ns / total if total > 0 else 0.0
    return out.sort_values("ms_per_step", ascending=False, ignore_index=True)[OP_TYPE_COLUMNS]
