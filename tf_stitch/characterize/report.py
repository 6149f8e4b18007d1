"""The characterization report: tables (CSV and Markdown), figures (PNG) and an `index.html`
linking them, written whole into a folder (built aside, then renamed into place)."""

from __future__ import annotations

import datetime
import html
import platform
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tf_stitch.characterize import plots, storage
from tf_stitch.characterize.analyse import analyse, geomean, profile_runs
from tf_stitch.runtime.cache import replace_dir

MODEL_COLUMNS = [
    "model",
    "family",
    "status",
    "batch",
    "latency_ms",
    "launches_per_step",
    "top_layer",
    "top_layer_share",
    "gflops_per_step",
    "intensity",
    "achieved_gflops",
    "memory_bound_time_share",
    "costed_time_share",
    "wall_s",
    "error",
]
# Tables with a row per op or layer keep each model's slowest (or most variable) rows; the
# figures use every row.
PER_MODEL_LIMITED = {"roofline_ops", "roofline_layers", "layer_variance"}
PER_MODEL_ROWS = 30
MARKDOWN_ROWS = 500
FUSION_COLUMNS = [
    "model",
    "kernels_before",
    "kernels_after",
    "kernel_ratio",
    "latency_before_ms",
    "latency_after_ms",
    "speedup",
    "outputs_match",
    "optimize_s",
    "error",
]


def _markdown(frame: pd.DataFrame, columns: list[str] | None = None, digits: int = 3) -> str:
    if frame.empty:
        return "(none)\n"
    frame = frame[[c for c in (columns or list(frame.columns)) if c in frame.columns]]

    def cell(v: Any) -> str:
        if isinstance(v, float | np.floating):
            return "" if np.isnan(v) else f"{v:.{digits}g}"
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += [
        "| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)
    ]
    return "\n".join(lines) + "\n"


def summary(tables: dict[str, pd.DataFrame], records: list[dict[str, Any]]) -> dict[str, Any]:
    models, fusion = tables["models"], tables["fusion"]
    ok = models[models.status == "ok"]
    starts = sorted(r.get("first_started") or r.get("started", "") for r in records)
    out: dict[str, Any] = {
        "models": len(models),
        "ok": len(ok),
        "failed": int((models.status != "ok").sum()),
        "model_wall_s": float(pd.to_numeric(models.wall_s, errors="coerce").sum()),
        "first_start": next((t for t in starts if t), ""),
        "hosts": sorted({r.get("host", "") for r in records} - {""}),
    }
    if not fusion.empty and "speedup" in fusion:
        out.update(
            kernel_ratio_geomean=geomean(fusion.kernel_ratio),
            speedup_geomean=geomean(fusion.speedup),
            optimized=int(fusion.speedup.notna().sum()),
            outputs_match=int(fusion.outputs_match.eq(True).sum()),
        )
    if "memory_bound_time_share" in ok:
        out["memory_bound_time_share_median"] = float(ok.memory_bound_time_share.median())
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def findings(tables: dict[str, pd.DataFrame]) -> list[str]:
    """What the tables say across the levels, as sentences computed from them."""
    models, fusion = tables["models"], tables["fusion"]
    ok = models[models.status == "ok"]
    out: list[str] = []
    if "memory_bound_time_share" in ok and ok.memory_bound_time_share.notna().any():
        costed = ok.set_index("model")
        share = costed[costed.costed_time_share >= 0.5].memory_bound_time_share.dropna()
        partial = costed[costed.costed_time_share < 0.5].index.tolist()
        out.append(
            f"- Memory-bound ops (arithmetic intensity below the measured ridge point) take a "
            f"median {_pct(share.median())} of the op time per model, from "
            f"{_pct(share.min())} ({share.idxmin()}) to {_pct(share.max())} ({share.idxmax()})"
            + (
                f"; left out: {', '.join(partial)}, whose FLOPs are known for less than half of "
                "the op time (the ops of loop bodies have none)."
                if partial
                else "."
            )
        )
    if "framework_share" in ok and ok.framework_share.notna().any():
        fw = ok.set_index("model").framework_share.dropna()
        out.append(
            f"- TensorFlow's own time around the ops (the call before the first op and the return "
            f"after the last) is a median {_pct(fw.median())} of a step, up to {_pct(fw.max())} "
            f"({fw.idxmax()}): the part of the latency no op-level tool attributes."
        )
    ops = tables.get("op_types_zoo", pd.DataFrame())
    if not ops.empty:
        top = ", ".join(f"{r.type} ({_pct(r.mean_time_share)})" for r in ops.head(5).itertuples())
        out.append(f"- The op types with the largest mean share of a model's op time: {top}.")
    layers = tables.get("layer_types_zoo", pd.DataFrame())
    if not layers.empty:
        top = ", ".join(
            f"{r.type} ({_pct(r.mean_time_share)} of the time, {_pct(r.count_share)} of the layers)"
            for r in layers.head(3).itertuples()
        )
        out.append(f"- Layer types by mean share of a model's layer time: {top}.")
    if not fusion.empty and "speedup" in fusion:
        ran = fusion.dropna(subset=["speedup"])
        slower = ran[ran.speedup < 1].model.tolist()
        more = ran[ran.kernels_after > ran.kernels_before].model.tolist()
        failed = fusion[fusion.speedup.isna()].model.tolist()
        out.append(
            f"- tf_stitch ran on {len(ran)} models: faster on {len(ran) - len(slower)}, slower on "
            f"{len(slower)} ({', '.join(slower) or 'none'}); more kernels per step than "
            f"TensorFlow on {len(more)} ({', '.join(more) or 'none'}); it did not run on "
            f"{len(failed)} ({', '.join(failed) or 'none'})."
        )
    if (models.status != "ok").any():
        bad = models[models.status != "ok"]
        out.append(
            "- Failed: " + "; ".join(f"{r.model} ({r.error[:80]})" for r in bad.itertuples())
        )
    return out or ["- (no profiles)"]


def _report_md(tables: dict[str, pd.DataFrame], s: dict[str, Any], figures: list[Path]) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# tf_stitch characterization",
        "",
        f"Written {now} by `tf-stitch characterize` on {', '.join(s['hosts']) or platform.node()}. "
        f"{s['models']} models: {s['ok']} profiled, {s['failed']} failed; the models' processes "
        f"took {s['model_wall_s'] / 60:.1f} min in all (first started {s['first_start']}).",
        "",
    ]
    if "speedup_geomean" in s:
        lines += [
            f"tf_stitch optimized {s['optimized']} models ({s['outputs_match']} with outputs "
            f"matching TensorFlow's): kernels per step {s['kernel_ratio_geomean']:.2f}x and "
            f"latency speedup {s['speedup_geomean']:.2f}x (geometric means).",
            "",
        ]
    lines += ["## Findings", "", *findings(tables), ""]
    lines += ["## Figures", ""] + [f"![{f.stem}](plots/{f.name})" for f in figures] + [""]
    sections = [
        ("Model families", "families", None),
        ("Models", "models", MODEL_COLUMNS),
        ("Effect of tf_stitch.optimize", "fusion", FUSION_COLUMNS),
        ("Layer types over the zoo", "layer_types_zoo", None),
        ("Op types over the zoo", "op_types_zoo", None),
        ("Latency and throughput by batch size", "latency_by_batch", None),
        ("Top layers per model (by time per step)", "top_layers", None),
        ("Top ops per model", "top_ops", None),
    ]
    for title, name, columns in sections:
        frame = tables.get(name, pd.DataFrame())
        lines += [f"## {title}", "", f"CSV: `tables/{name}.csv`", "", _markdown(frame, columns)]
    lines += [
        "Other tables (CSV): "
        + ", ".join(f"`tables/{n}.csv`" for n in tables if n not in {x[1] for x in sections}),
        "",
    ]
    return "\n".join(lines)


def _index_html(s: dict[str, Any], tables: dict[str, pd.DataFrame], figures: list[Path]) -> str:
    esc = html.escape
    items = "".join(
        f'<li><a href="tables/{esc(n)}.csv">{esc(n)}.csv</a> · '
        f'<a href="tables/{esc(n)}.md">{esc(n)}.md</a> ({len(t)} rows)</li>'
        for n, t in tables.items()
    )
    figs = "".join(
        f'<figure><img src="plots/{esc(f.name)}" alt="{esc(f.stem)}" style="max-width:100%">'
        f"<figcaption>{esc(f.stem)}</figcaption></figure>"
        for f in figures
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>tf_stitch characterization"
        "</title></head><body style='font-family:sans-serif;max-width:1100px;margin:auto'>"
        f"<h1>tf_stitch characterization</h1><p>{s['models']} models, {s['ok']} profiled, "
        f"{s['failed']} failed. <a href='report.md'>report.md</a></p><h2>Tables</h2>"
        f"<ul>{items}</ul><h2>Figures</h2>{figs}</body></html>"
    )


def write_report(logdir: str, out: Path) -> Path:
    """Analyses every record and profile under `logdir` and writes the report into `out`."""
    records = storage.read_records(logdir)
    if not records:
        raise ValueError(f"no characterization records under {logdir}: run the models first")
    with tempfile.TemporaryDirectory(prefix="tf_stitch_report_") as scratch:
        local = storage.local_profiles(logdir, profile_runs(records), Path(scratch))
        tables = analyse(records, local)
    s = summary(tables, records)

    def fill(staging: Path) -> None:
        (staging / "tables").mkdir()
        (staging / "plots").mkdir()
        for name, frame in tables.items():
            if name in PER_MODEL_LIMITED and "model" in frame:
                frame = frame.groupby("model", sort=False).head(PER_MODEL_ROWS)
            frame.to_csv(staging / "tables" / f"{name}.csv", index=False)
            text = (
                _markdown(frame)
                if len(frame) <= MARKDOWN_ROWS
                else (f"{len(frame)} rows: see {name}.csv\n")
            )
            (staging / "tables" / f"{name}.md").write_text(text)
        p = staging / "plots"
        made = [
            plots.latency(tables["latency_by_batch"], p / "latency_vs_batch.png"),
            plots.top_layers(tables["top_layers"], tables["models"], p / "top_layers.png"),
            plots.layer_types(tables["layer_types_zoo"], p / "layer_types.png"),
            plots.layer_types(tables["op_types_zoo"], p / "op_types.png", "op"),
            plots.roofline(tables["roofline_layers"], tables["models"], p / "roofline.png"),
            plots.fusion(tables["fusion"], p / "fusion.png"),
        ]
        figures = [f for f in made if f is not None]
        (staging / "report.md").write_text(_report_md(tables, s, figures))
        (staging / "index.html").write_text(_index_html(s, tables, figures))

    return replace_dir(out, fill)
