"""A profile as Chrome trace JSON (the Trace Event Format), which Perfetto and chrome://tracing
open: one process, one track per level (more where spans of a level overlap, as ops of two
inter-op threads do), steps laid end to end, and a flow arrow from each op to the library work
and kernels it launched."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from tb_plugin.metadata import ProfileMeta
from tf_stitch.profiler.trace.intervals import assign_lanes
from tf_stitch.profiler.trace.spans import LEVELS

PID = 1
STEP_GAP_US = 10.0  # between consecutive steps on the timeline
_LAUNCHED = ("library", "kernel")  # levels whose spans get a flow arrow from their op


def chrome_trace(spans: pd.DataFrame, meta: ProfileMeta) -> dict[str, Any]:
    """The Trace Event Format document of a profile's span table."""
    df = spans.copy()
    steps = sorted(df.step.unique())
    roots = df[df.parent == -1].set_index("step")
    offset, origin = 0.0, {}
    for step in steps:
        origin[step] = offset
        offset += float(roots.at[step, "end_ns"]) / 1e3 + STEP_GAP_US
    df["start_us"] = [origin[s] + t / 1e3 for s, t in zip(df.step, df.start_ns, strict=True)]
    df["end_us"] = [origin[s] + t / 1e3 for s, t in zip(df.step, df.end_ns, strict=True)]
    df["lane"] = 0
    for level in LEVELS:
        rows = df.level == level
        if rows.any():
            sel = df[rows]
            df.loc[rows, "lane"] = assign_lanes(list(zip(sel.start_us, sel.end_us, strict=True)))
    tracks: dict[tuple[str, int], int] = {}
    for level in LEVELS:
        for lane in sorted(df[df.level == level].lane.unique()):
            tracks[(level, int(lane))] = len(tracks) + 1
    events: list[dict[str, Any]] = [
        {
            "ph": "M",
            "pid": PID,
            "name": "process_name",
            "args": {"name": f"tf_stitch profile: {meta.get('model', 'model')}"},
        },
    ]
    for (level, lane), tid in tracks.items():
        label = level if lane == 0 else f"{level} ({lane + 1})"
        events.append(
            {"ph": "M", "pid": PID, "tid": tid, "name": "thread_name", "args": {"name": label}}
        )
        events.append(
            {
                "ph": "M",
                "pid": PID,
                "tid": tid,
                "name": "thread_sort_index",
                "args": {"sort_index": tid},
            }
        )
    tid_of: dict[tuple[int, int], int] = {}
    for row in df.itertuples():
        tid = tracks[(row.level, int(row.lane))]
        tid_of[(int(row.step), int(row.id))] = tid
        events.append(
            {
                "ph": "X",
                "pid": PID,
                "tid": tid,
                "name": str(row.name),
                "cat": str(row.level),
                "ts": row.start_us,
                "dur": max(row.end_us - row.start_us, 0.0),
                "args": {
                    "type": row.type,
                    "step": int(row.step),
                    "run": row.run,
                    "raw_ns": row.raw_ns,
                    "corrected_ns": row.corrected_ns,
                },
            }
        )
    events.extend(_flows(df, tid_of))
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": _other(meta)}


def _flows(df: pd.DataFrame, tid_of: dict[tuple[int, int], int]) -> Iterable[dict[str, Any]]:
    """A flow (s at the op, f at the launched span's start) for every library and kernel span."""
    ops = df[df.level == "op"].set_index(["step", "id"])
    flow = 0
    for row in df[df.level.isin(_LAUNCHED)].itertuples():
        key = (int(row.step), int(row.parent))
        if key not in ops.index:
            continue
        op = ops.loc[key]
        flow += 1
        common = {"pid": PID, "cat": "launch", "name": "launch", "id": flow}
        # The flow leaves the op where the launched work starts (clamped inside the op's slice).
        start = min(max(row.start_us, float(op.start_us)), float(op.end_us))
        yield {**common, "ph": "s", "tid": tid_of[key], "ts": start}
        yield {
            **common,
            "ph": "f",
            "bp": "e",
            "tid": tid_of[(int(row.step), int(row.id))],
            "ts": row.start_us,
        }


def _other(meta: ProfileMeta) -> dict[str, Any]:
    keep = ("model", "batch", "device", "tensorflow", "levels", "steps", "model_latency_ns")
    return {k: v for k, v in meta.items() if k in keep}


def write_chrome_trace(
    spans: pd.DataFrame, meta: ProfileMeta, path: str | os.PathLike[str]
) -> None:
    """Writes the trace to `path` (gzip-compressed when it ends in `.gz`)."""
    data = json.dumps(chrome_trace(spans, meta), default=str).encode()
    target = Path(path)
    if target.suffix == ".gz":
        data = gzip.compress(data)
    target.write_bytes(data)
