"""The campaign's tables: every analysis of `profiler/analyses` run over each model's profiles,
gathered into zoo-wide tables (a `model` column first)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from tf_stitch.profiler.analyses.batch_latency import latency_by_batch
from tf_stitch.profiler.analyses.flops import executed_costs, executed_types
from tf_stitch.profiler.analyses.fusion_effect import fusion_effect
from tf_stitch.profiler.analyses.kernels import (
    kernels_by_name,
    kernels_per_layer,
    launches_per_step,
)
from tf_stitch.profiler.analyses.layer_variance import layer_variance
from tf_stitch.profiler.analyses.op_types import op_type_distribution
from tf_stitch.profiler.analyses.roofline import layer_roofline, op_roofline, ridge_point
from tf_stitch.profiler.analyses.top_k import top_k
from tf_stitch.profiler.analyses.type_distribution import type_distribution
from tf_stitch.profiler.store.profile import Profile

TOP = 5  # rows per model in the per-model tables


def _stack(parts: dict[str, pd.DataFrame]) -> pd.DataFrame:
    frames = [df.assign(model=m)[["model", *df.columns]] for m, df in parts.items() if len(df)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _safe(fn: Callable[[], Any], errors: list[str], what: str) -> Any:
    try:
        return fn()
    except Exception as e:  # one analysis failing on one model must not sink the report
        errors.append(f"{what}: {type(e).__name__}: {e}")
        return None


def analyse(records: list[dict[str, Any]], logdir: str) -> dict[str, pd.DataFrame]:
    """All tables of the report from the records and the profiles under `logdir` (local)."""
    parts: dict[str, dict[str, pd.DataFrame]] = {
        k: {}
        for k in (
            "top_layers",
            "top_ops",
            "op_types",
            "layer_types",
            "layer_variance",
            "kernels_per_layer",
            "kernels_by_name",
            "roofline_layers",
            "roofline_ops",
        )
    }
    metas: list[dict[str, Any]] = []
    models: list[dict[str, Any]] = []
    fusion: list[dict[str, Any]] = []
    for rec in records:
        model, errors = rec["model"], list[str]()
        row: dict[str, Any] = {
            "model": model,
            "family": rec.get("family", ""),
            "status": rec["status"],
            "inputs": rec.get("inputs", ""),
            "wall_s": (rec.get("wall_s") or 0.0) + (rec.get("earlier_wall_s") or 0.0),
            "error": (rec.get("error") or "")[:200],
        }
        runs = rec.get("runs", {})
        profiles = {
            int(b): _safe(functools.partial(Profile.load, logdir, r), errors, f"load {r}")
            for b, r in runs.items()
        }
        metas += [p.meta for p in profiles.values() if p is not None]
        if rec["status"] == "ok" and runs:
            base = profiles.get(int(rec["batch_sizes"][0]))
            if base is not None:
                row.update(_model_analyses(rec, base, parts, errors))
                stitched = _stitched(rec, base, logdir, parts, errors)
                if "stitched_run" in rec or "optimize_error" in rec:
                    fusion.append({"model": model, **stitched})
        row["analysis_errors"] = "; ".join(errors)[:300]
        models.append(row)
    tables = {
        "models": pd.DataFrame(models),
        "latency_by_batch": latency_by_batch(metas),
        "fusion": pd.DataFrame(fusion),
    }
    tables.update({name: _stack(p) for name, p in parts.items()})
    tables["layer_types_zoo"] = _zoo_types(tables["layer_types"], tables["models"])
    tables["op_types_zoo"] = _zoo_types(tables["op_types"], tables["models"], "ops")
    tables["families"] = _families(tables["models"], tables["fusion"])
    return tables


def _model_analyses(
    rec: dict[str, Any], p: Profile, parts: dict[str, dict[str, pd.DataFrame]], errors: list[str]
) -> dict[str, Any]:
    model, spans = rec["model"], p.spans
    latency_ms = p.model_latency_ns / 1e6
    row: dict[str, Any] = {
        "batch": p.meta.get("batch"),
        "latency_ms": latency_ms,
        "launches_per_step": launches_per_step(spans),
    }
    layers = p.table("layer")
    parts["top_layers"][model] = top_k(layers, TOP)
    parts["top_ops"][model] = top_k(p.table("op"), TOP)
    parts["layer_types"][model] = type_distribution(layers, p.meta.get("layer_types", {}))
    parts["op_types"][model] = op_type_distribution(p.table("op"))
    row["framework_share"] = float(layers[layers.type == "framework"].share.sum())
    parts["layer_variance"][model] = layer_variance(spans)
    parts["kernels_per_layer"][model] = kernels_per_layer(spans).head(TOP)
    top = layers[layers.type != "framework"].head(1)
    if len(top):
        row.update(top_layer=top.name.iloc[0], top_layer_share=float(top.share.iloc[0]))
    peaks = rec.get("peaks")
    if peaks and not p.ops.empty:
        ops = spans[spans.level == "op"]
        costs = _safe(lambda: executed_costs(p.ops, executed_types(ops)), errors, "flops")
        if costs is not None:
            roof = op_roofline(ops, costs, peaks)
            parts["roofline_ops"][model] = roof
            parts["roofline_layers"][model] = layer_roofline(spans, roof, peaks)
            flops, moved = np.nansum(roof.flops), np.nansum(roof.bytes)
            memory_ms = roof[roof.bound == "memory"].ms_per_step.sum()
            classified_ms = memory_ms + roof[roof.bound == "compute"].ms_per_step.sum()
            total_ms = roof.ms_per_step.sum()
            row.update(
                gflops_per_step=flops / 1e9,
                mbytes_per_step=moved / 1e6,
                intensity=flops / moved if moved else np.nan,
                achieved_gflops=flops / 1e9 / (latency_ms / 1e3),
                peak_gflops=peaks["flops_per_s"] / 1e9,
                peak_gbytes=peaks["bytes_per_s"] / 1e9,
                ridge=ridge_point(peaks),
                # Of the op time spent in ops whose FLOPs and bytes are known.
                memory_bound_time_share=memory_ms / classified_ms if classified_ms else np.nan,
                # How much of the op time has known FLOPs (ops in loop bodies have none).
                costed_time_share=classified_ms / total_ms if total_ms else np.nan,
            )
    return row


def _stitched(
    rec: dict[str, Any],
    base: Profile,
    logdir: str,
    parts: dict[str, dict[str, pd.DataFrame]],
    errors: list[str],
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "optimize_s": rec.get("optimize_s"),
        "stitched_kernels": rec.get("stitched_kernels"),
        "outputs_match": rec.get("outputs_match"),
        "max_abs_diff": rec.get("max_abs_diff"),
        "error": (rec.get("optimize_error") or "")[:200],
    }
    name = rec.get("stitched_run")
    after = _safe(lambda: Profile.load(logdir, name), errors, "load stitched") if name else None
    if after is not None:
        out.update(fusion_effect(base.spans, base.meta, after.spans, after.meta))
        parts["kernels_by_name"][rec["model"]] = kernels_by_name(
            after.spans, after.model_latency_ns
        ).head(TOP)
    return out


def _zoo_types(
    per_model: pd.DataFrame, models: pd.DataFrame, count: str = "layers"
) -> pd.DataFrame:
    """Layer (or op) types over the zoo: in how many models, how many layers (ops), and their
    mean share of a model's layer (op) time (each model weighs the same)."""
    if per_model.empty:
        return pd.DataFrame()
    n = max(int((models.status == "ok").sum()), 1)
    g = per_model.groupby("type").agg(
        models=("model", "nunique"), **{count: (count, "sum")}, time_share_sum=("time_share", "sum")
    )
    g["mean_time_share"] = g.time_share_sum / n
    g["count_share"] = g[count] / g[count].sum()
    out = g.drop(columns="time_share_sum").reset_index()
    return out.sort_values("mean_time_share", ascending=False, ignore_index=True)


def profile_runs(records: list[dict[str, Any]]) -> list[str]:
    """Every profile run the records name."""
    runs = [r for rec in records for r in rec.get("runs", {}).values()]
    return runs + [rec["stitched_run"] for rec in records if rec.get("stitched_run")]


def _families(models: pd.DataFrame, fusion: pd.DataFrame) -> pd.DataFrame:
    """Per model family: models profiled, and the medians of latency, the memory-bound share
    of op time, TensorFlow's own share of the step and the achieved GFLOP/s; with tf_stitch's
    kernel ratio and speedup (geometric means) where it ran."""
    ok = models[models.status == "ok"]
    if ok.empty:
        return pd.DataFrame()
    columns = ["latency_ms", "memory_bound_time_share", "framework_share", "achieved_gflops"]
    present = [c for c in columns if c in ok]
    out = ok.groupby("family").agg(
        models=("model", "size"), **{f"median_{c}": (c, "median") for c in present}
    )
    if not fusion.empty and "speedup" in fusion:
        joined = fusion.merge(ok[["model", "family"]], on="model")
        geo = joined.groupby("family")[["kernel_ratio", "speedup"]].agg(geomean)
        out = out.join(geo.add_prefix("geomean_"))
    return out.reset_index()


def geomean(values: pd.Series) -> float:
    """Geometric mean of the positive numbers in `values` (NaN if none)."""
    v = pd.to_numeric(values, errors="coerce").dropna()
    v = v[v > 0]
    return float(np.exp(np.log(v).mean())) if len(v) else float("nan")
