"""The report's figures (matplotlib, Agg backend, PNG): latency against batch size, the top
layers of one model per family, layer types, the roofline and the effect of fusion."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

DPI = 110


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    _pyplot().close(fig)
    return path


def latency(batches: pd.DataFrame, path: Path) -> Path | None:
    """Latency against batch size per model (one line each); one batch size: a bar per model."""
    if batches.empty:
        return None
    plt = _pyplot()
    if batches.batch.nunique() > 1:
        fig, ax = plt.subplots(figsize=(9, 6))
        for model, g in batches.groupby("model"):
            ax.plot(g.batch, g.latency_ms, marker="o", lw=1, label=model)
        ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="latency (ms)")
        if batches.model.nunique() <= 20:
            ax.legend(fontsize=7, ncol=2)
        return _save(fig, path)
    ordered = batches.sort_values("latency_ms")
    fig, ax = plt.subplots(figsize=(9, max(4, 0.16 * len(ordered))))
    ax.barh(ordered.model, ordered.latency_ms, color="#4c72b0")
    ax.set(xscale="log", xlabel=f"latency (ms) at batch {int(ordered.batch.iloc[0])}")
    ax.tick_params(axis="y", labelsize=7)
    return _save(fig, path)


def top_layers(top: pd.DataFrame, models: pd.DataFrame, path: Path) -> Path | None:
    """Top-k layers by share of the step for the first model of each family."""
    ok = models[models.status == "ok"]
    picks = [g.model.iloc[0] for _, g in ok.groupby("family", sort=False)]
    picks = [m for m in picks if m in set(top.model)] if not top.empty else []
    if not picks:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(len(picks), 1, figsize=(8, 2.2 * len(picks)), squeeze=False)
    for ax, model in zip(axes[:, 0], picks, strict=True):
        g = top[top.model == model].iloc[::-1]
        ax.barh([str(n)[-40:] for n in g.name], g.share * 100, color="#55a868")
        ax.set_title(model, fontsize=9)
        ax.set_xlabel("% of the step", fontsize=8)
        ax.tick_params(labelsize=7)
    return _save(fig, path)


def layer_types(
    zoo_types: pd.DataFrame, path: Path, kind: str = "layer", k: int = 15
) -> Path | None:
    """The most common layer (or op) types over the zoo, by time and by count."""
    if zoo_types.empty:
        return None
    plt = _pyplot()
    top = zoo_types.head(k).iloc[::-1]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 5), sharey=True)
    a.barh(top.type, top.mean_time_share * 100, color="#c44e52")
    a.set_xlabel(f"mean % of a model's {kind} time")
    b.barh(top.type, top.count_share * 100, color="#8172b2")
    b.set_xlabel(f"% of all {kind}s")
    a.tick_params(labelsize=8)
    return _save(fig, path)


def roofline(layers: pd.DataFrame, models: pd.DataFrame, path: Path) -> Path | None:
    """Every layer of every model: achieved GFLOP/s against intensity, under the measured
    roofs (the median of the models' peaks)."""
    ok = layers.dropna(subset=["intensity", "achieved_gflops"])
    ok = ok[(ok.intensity > 0) & (ok.achieved_gflops > 0)]
    if ok.empty or "peak_gflops" not in models:
        return None
    plt = _pyplot()
    peak = float(models.peak_gflops.median())
    bandwidth = float(models.peak_gbytes.median())
    families = models.set_index("model").family
    fig, ax = plt.subplots(figsize=(8, 6))
    for family, g in ok.groupby(ok.model.map(families)):
        ax.scatter(g.intensity, g.achieved_gflops, s=6, alpha=0.5, label=family)
    x = np.logspace(np.log10(ok.intensity.min() / 2), np.log10(ok.intensity.max() * 2), 200)
    ax.plot(
        x,
        np.minimum(peak, x * bandwidth),
        "k-",
        lw=1.5,
        label=f"roof: {peak:.0f} GFLOP/s, {bandwidth:.1f} GB/s",
    )
    ax.axvline(peak / bandwidth, color="gray", ls=":", lw=1)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="arithmetic intensity (FLOP/byte)",
        ylabel="achieved GFLOP/s",
    )
    ax.legend(fontsize=8)
    return _save(fig, path)


def fusion(effect: pd.DataFrame, path: Path) -> Path | None:
    """Kernels per step and latency before and after tf_stitch, per model."""
    if effect.empty or not {"kernels_before", "kernels_after"} <= set(effect.columns):
        return None
    ok = effect.dropna(subset=["kernels_before", "kernels_after"])
    if ok.empty:
        return None
    plt = _pyplot()
    ok = ok.sort_values("kernel_ratio")
    y = np.arange(len(ok))
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, max(4, 0.17 * len(ok))), sharey=True)
    a.barh(y - 0.2, ok.kernels_before, 0.4, label="TensorFlow", color="#4c72b0")
    a.barh(y + 0.2, ok.kernels_after, 0.4, label="tf_stitch", color="#dd8452")
    a.set(xscale="log", xlabel="kernels per step")
    a.set_yticks(y, ok.model, fontsize=7)
    a.legend(fontsize=8)
    b.barh(y, ok.speedup, color=np.where(ok.speedup >= 1, "#55a868", "#c44e52"))
    b.axvline(1.0, color="k", lw=1)
    b.set_xlabel("speedup (TF latency / tf_stitch latency)")
    return _save(fig, path)
