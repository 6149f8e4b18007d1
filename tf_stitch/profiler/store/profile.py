"""`Profile`: the merged, leveled profile of one model as tables, and its store in a logdir.

The span table has one row per span of every traced step (one tree per step): `step`, `id`,
`parent` (-1 for the step's root), `level`, `name`, `type`, `start_ns`, `end_ns`, `raw_ns`
(duration as traced), `attributed_ns` (the duration with time shared by concurrent spans of the
level split evenly between them, so a level's times add up to the time it covers),
`corrected_ns` (attributed, minus its share of the measured cost of the trace events recorded
in it), `tracing_events`, `thread`, `run` (the run it was measured in) and `cpu_ns` (for spans on
a host thread: its wall time times the share of its thread pool's busy time that pool was on a
CPU in that step, `thread_cpu`; empty where unknown). The model row of each
step holds run A's latency for that step instead (the model level is measured untraced).

Stored under `<logdir>/plugins/tf_stitch/<run>/`: `spans.jsonl.gz`, `trace.json.gz` (Chrome
trace JSON for Perfetto), `meta.json` (model, batch, device, versions, levels, per-level
overheads, the event cost, coverage, Keras layer types), `ops.json.gz` (the graph's nodes with
shapes) and, for an optimized graph, `kernels.json` (its fusion groups).
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tb_plugin import metadata
from tb_plugin.metadata import ProfileMeta
from tf_stitch.profiler.export.chrome import chrome_trace, write_chrome_trace
from tf_stitch.profiler.measure.leveled import TRIM
from tf_stitch.profiler.trace.op_table import OP_COLUMNS
from tf_stitch.profiler.trace.spans import LEVELS
from tf_stitch.runtime.cache import replace_dir

# Where the tab looks for profiles and what it opens (tb_plugin/metadata.py owns the names).
STORE_DIR = Path(metadata.PROFILES_DIR)
SPANS_FILE, META_FILE, TRACE_FILE = (
    metadata.PROFILE_SPANS,
    metadata.PROFILE_META,
    metadata.PROFILE_TRACE,
)
KERNELS_FILE = metadata.PROFILE_KERNELS  # the fusion groups of a profiled optimized graph
OPS_FILE = metadata.PROFILE_OPS  # the graph's nodes with shapes (`op_table`)
DECISIONS_FILE = metadata.PROFILE_DECISIONS  # an optimized graph's decisions, as explain() has
COLUMNS = [
    "step",
    "id",
    "parent",
    "level",
    "name",
    "type",
    "start_ns",
    "end_ns",
    "raw_ns",
    "attributed_ns",
    "corrected_ns",
    "tracing_events",
    "thread",
    "run",
    "cpu_ns",
]


def check_run_name(run: str) -> str:
    """`run` if it can name a directory inside the logdir that the tab will open; ValueError
    otherwise."""
    problem = metadata.run_name_problem(run)
    if problem:
        raise ValueError(f"invalid run name {run[:80]!r}: {problem}")
    return run


def _trimmed_rows(values: np.ndarray) -> np.ndarray:
    """`leveled.trimmed_mean` of every row of a 2-D array."""
    ordered = np.sort(values, axis=1)
    n = ordered.shape[1]
    cut = int(n * TRIM / 2)
    kept = ordered[:, cut : n - cut] if n - 2 * cut > 0 else ordered
    return kept.mean(axis=1)


class Profile:
    """A leveled profile: `spans` (DataFrame, see the module doc) and `meta` (dict)."""

    def __init__(
        self,
        spans: pd.DataFrame,
        meta: ProfileMeta,
        kernels: list[dict[str, Any]] | None = None,
        ops: pd.DataFrame | None = None,
        decisions: list[dict[str, str]] | None = None,
    ) -> None:
        self.spans = spans
        self.meta = meta
        self.kernels = kernels or []  # fusion groups: node, members, schedule, memory, source
        # An optimized graph's decisions, each {kind, subject, verdict, reason} (explain()'s).
        self.decisions = decisions or []
        # The profiled graph's nodes with their shapes (`op_table.op_table`); empty if unknown.
        self.ops = ops if ops is not None else pd.DataFrame(columns=OP_COLUMNS)

    @property
    def model_latency_ns(self) -> float:
        """Run A's model latency, trimmed mean over its steps."""
        return float(self.meta["model_latency_ns"])

    def level(self, level: str) -> pd.DataFrame:
        """The spans of one level (all steps)."""
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
        return self.spans[self.spans.level == level]

    def per_step(self, level: str, column: str = "corrected_ns") -> pd.Series:
        """Sum of `column` over the spans of `level`, per step."""
        return self.level(level).groupby("step")[column].sum()

    def table(self, level: str) -> pd.DataFrame:
        """One row per name at `level`: calls per step, trimmed-mean time per step (raw and
        corrected, ns; a step where the name did not run counts as 0), `cpu_ns` (its estimated
        CPU time, where the level runs on host threads and their clocks were read) and its
        share of the model latency; slowest first. Vectorized: fast on 100k-span profiles."""
        spans = self.level(level)
        steps = sorted(self.spans.step.unique()) or [0]
        columns = ["name", "type", "calls_per_step", "raw_ns", "corrected_ns"]
        if spans.empty:
            return pd.DataFrame(columns=[*columns, "share"])
        keys = ["name", "type"]
        per_step = spans.groupby([*keys, "step"])[["raw_ns", "corrected_ns"]].sum()
        out = spans.groupby(keys).size().rename("calls_per_step").to_frame() / len(steps)
        for column in ("raw_ns", "corrected_ns"):
            wide = per_step[column].unstack("step").reindex(columns=steps).fillna(0.0)
            out[column] = _trimmed_rows(wide.to_numpy()).tolist()
        if "cpu_ns" in spans and spans.cpu_ns.notna().any():  # for spans on a host thread
            cpu = spans.groupby([*keys, "step"])["cpu_ns"].sum().unstack("step")
            out["cpu_ns"] = _trimmed_rows(cpu.reindex(columns=steps).fillna(0.0).to_numpy())
            columns.append("cpu_ns")
        out = out.reset_index()[columns]
        out["share"] = out.corrected_ns / self.model_latency_ns
        return out.sort_values("corrected_ns", ascending=False, ignore_index=True)

    def summary(self, top: int = 10) -> str:
        """Model latency, per-level overheads and coverage, and the slowest layers."""
        m = self.meta
        ci = m.get("model_latency_ci_ns")
        within = f", 95% CI {ci[0] / 1e6:.3f}-{ci[1] / 1e6:.3f} ms" if ci else ""
        how = f"median of {m['blocks']} blocks' medians" if "blocks" in m else "trimmed mean"
        layer_ci = m.get("layer_sum_vs_model_ci")
        layer_within = f" (95% CI {layer_ci[0]:.1%}-{layer_ci[1]:.1%})" if layer_ci else ""
        lines = [
            f"{m.get('model', 'model')}: {self.model_latency_ns / 1e6:.3f} ms per step "
            f"(run A, {m['steps']} steps, {how}{within}; "
            f"{m.get('device', '')})",
        ]
        if "stability" in m:
            lines.append(str(m["stability"].get("message", "")))
        if "model_cpu_ns" in m:  # wall time inflated by a busy machine shows against it
            lines.append(
                f"CPU time per step {m['model_cpu_ns'] / 1e6:.3f} ms over all threads "
                f"({m['cpu_per_wall']:.2f} CPUs busy on average in run A)"
            )
        on_cpu = m.get("thread_cpu", {})
        everyone = on_cpu.get("all", {})
        if "on_cpu" in everyone:  # the rest: waiting for a CPU (a busy machine) or blocked
            pools = ", ".join(
                f"{k} {v['on_cpu']:.0%}" for k, v in sorted(on_cpu.items()) if k != "all"
            )
            lines.append(
                f"traced threads on a CPU {everyone['on_cpu']:.0%} of their busy time "
                f"({pools}); the rest they waited for a CPU or were blocked"
            )
        lines += [
            f"layer times sum to {m['layer_sum_vs_model']:.1%} of it corrected{layer_within} "
            f"({m['layer_sum_vs_model_raw']:.1%} raw); layer spans cover "
            f"{m['layer_coverage']:.1%} of the traced step; one trace event costs "
            f"{m['event_cost_ns']:.0f} ns; the model's own layers (without TensorFlow's call and "
            f"return) {m['model_layers_vs_model']:.1%}",
        ]
        for level, info in m["overheads"].items():
            o_ci = info.get("overhead_ci")
            o_within = f", 95% CI {o_ci[0]:+.1%} to {o_ci[1]:+.1%}" if o_ci else ""
            lines.append(
                f"  {level} tracing: step {info['latency_ns'] / 1e6:.3f} ms, "
                f"overhead {info['overhead']:+.1%}{o_within} (run {info['run']})"
            )
        for level, reason in m.get("missing_levels", {}).items():
            lines.append(f"  no {level} level: {reason}")
        layers = self.table("layer").head(top)
        lines.append(f"{'layer':<32}{'calls':>7}{'ms/step':>10}{'share':>8}")
        for r in layers.itertuples():
            lines.append(
                f"{str(r.name)[:31]:<32}{r.calls_per_step:>7.1f}"
                f"{r.corrected_ns / 1e6:>10.3f}{r.share:>8.1%}"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def chrome_trace(self) -> dict[str, Any]:
        """The profile in the Trace Event Format (Perfetto, chrome://tracing), with flow arrows
        from each op to the library work and kernels it launched."""
        return chrome_trace(self.spans, self.meta)

    # -- store ---------------------------------------------------------------------------------
    def save(self, logdir: str | os.PathLike[str], run: str) -> Path:
        """Writes the profile to `<logdir>/plugins/tf_stitch/<run>/` (built aside, then renamed
        into place: never half-written)."""
        check_run_name(run)

        def fill(staging: Path) -> None:
            with gzip.open(staging / SPANS_FILE, "wt", encoding="utf-8") as f:
                for row in self.spans[COLUMNS].to_dict("records"):
                    f.write(json.dumps(row) + "\n")
            (staging / META_FILE).write_text(json.dumps(self.meta, indent=2, default=str))
            write_chrome_trace(self.spans, self.meta, staging / TRACE_FILE)
            if self.kernels:
                (staging / KERNELS_FILE).write_text(json.dumps(self.kernels, indent=1))
            if self.decisions:
                (staging / DECISIONS_FILE).write_text(json.dumps(self.decisions, indent=1))
            if not self.ops.empty:
                with gzip.open(staging / OPS_FILE, "wt", encoding="utf-8") as f:
                    json.dump(self.ops[OP_COLUMNS].to_dict("records"), f)

        return replace_dir(Path(logdir) / STORE_DIR / run, fill)

    @classmethod
    def load(cls, logdir: str | os.PathLike[str], run: str) -> Profile:
        """Reads a profile `save` wrote; FileNotFoundError naming what is missing."""
        path = Path(logdir) / STORE_DIR / check_run_name(run)
        if not (path / META_FILE).is_file():
            raise FileNotFoundError(f"no tf_stitch profile {run!r} in {logdir} ({path})")
        meta = json.loads((path / META_FILE).read_text())
        with gzip.open(path / SPANS_FILE, "rt", encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        kernels_path = path / KERNELS_FILE
        kernels = json.loads(kernels_path.read_text()) if kernels_path.is_file() else []
        decisions_path = path / DECISIONS_FILE
        decisions = json.loads(decisions_path.read_text()) if decisions_path.is_file() else []
        ops = None
        if (path / OPS_FILE).is_file():
            with gzip.open(path / OPS_FILE, "rt", encoding="utf-8") as f:
                ops = pd.DataFrame(json.load(f), columns=OP_COLUMNS)
        return cls(pd.DataFrame(rows, columns=COLUMNS), meta, kernels, ops, decisions)
