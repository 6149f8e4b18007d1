"""Kernels per layer, and kernels aggregated by name.

Kernels are what the platform records at the kernel level: a tf_stitch-optimized graph's
`StitchedKernel` runs on a CPU, CUDA kernels on a GPU. Where no kernels are recorded, a layer's
launches are counted instead: the ops it ran that launch a kernel (`op_events.NO_KERNEL_OPS`
excluded), as the launch counter counts them.
"""

from __future__ import annotations

import pandas as pd

from tf_stitch.profiler.trace.op_events import NO_KERNEL_OPS

PER_LAYER_COLUMNS = ["layer", "launches_per_step", "kernels_per_step", "kernel_ms_per_step"]
BY_NAME_COLUMNS = ["name", "calls_per_step", "ms_per_step", "mean_us", "share"]


def _steps(spans: pd.DataFrame) -> int:
    return max(spans.step.nunique(), 1)


def launches_per_step(spans: pd.DataFrame) -> float:
    """Ops that launch a kernel per step (the launch count of the traced run)."""
    ops = spans[(spans.level == "op") & ~spans.type.isin(NO_KERNEL_OPS)]
    return len(ops) / _steps(spans)


def kernels_per_layer(spans: pd.DataFrame) -> pd.DataFrame:
    """Per layer: launching ops and recorded kernels per step, and the kernels' time."""
    steps = _steps(spans)
    ids = spans[["step", "id", "level", "name", "parent"]]
    layers = ids[ids.level == "layer"].rename(columns={"id": "lid", "name": "layer"})
    ops = spans[spans.level == "op"].merge(
        layers[["step", "lid", "layer"]], left_on=["step", "parent"], right_on=["step", "lid"]
    )
    launches = ops[~ops.type.isin(NO_KERNEL_OPS)].groupby("layer").size() / steps
    kernel_spans = spans[spans.level == "kernel"].merge(
        ops[["step", "id", "layer"]].rename(columns={"id": "oid"}),
        left_on=["step", "parent"],
        right_on=["step", "oid"],
    )
    kernels = kernel_spans.groupby("layer").size() / steps
    kernel_ms = kernel_spans.groupby("layer").corrected_ns.sum() / steps / 1e6
    out = pd.DataFrame(
        {
            "launches_per_step": launches,
            "kernels_per_step": kernels,
            "kernel_ms_per_step": kernel_ms,
        }
    ).fillna(0.0)
    out = out.rename_axis("layer").reset_index()
    return out.sort_values(
        ["launches_per_step", "layer"], ascending=[False, True], ignore_index=True
    )[PER_LAYER_COLUMNS]


def kernels_by_name(spans: pd.DataFrame, model_latency_ns: float) -> pd.DataFrame:
    """Recorded kernels grouped by name: calls and time per step, mean time per call, share
    of the model latency; slowest first. Empty when the platform recorded no kernels."""
    kernels = spans[spans.level == "kernel"]
    steps = _steps(spans)
    if kernels.empty:
        return pd.DataFrame(columns=BY_NAME_COLUMNS)
    g = kernels.groupby("name").corrected_ns.agg(["size", "sum"])
    out = pd.DataFrame(
        {
            "name": g.index,
            "calls_per_step": (g["size"] / steps).to_numpy(),
            "ms_per_step": (g["sum"] / steps / 1e6).to_numpy(),
            "mean_us": (g["sum"] / g["size"] / 1e3).to_numpy(),
        }
    )
    out["share"] = out.ms_per_step * 1e6 / model_latency_ns
    return out.sort_values("ms_per_step", ascending=False, ignore_index=True)[BY_NAME_COLUMNS]
