"""The profile's levels added to the TF profiler's own `xplane.pb`, as lines of its host plane,
so that XProf's trace viewer shows the model, layer, op, library and kernel spans above the
threads TensorFlow recorded (and its op statistics, made from TensorFlow's op events, stay as
they were: our op spans are named `node (OpType)`, which XProf does not read as op events)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from tf_stitch.profiler.trace.intervals import assign_lanes
from tf_stitch.profiler.trace.spans import LEVELS
from tf_stitch.profiler.trace.xplane import HOST_PLANE_NAME

LINE_PREFIX = "tf_stitch: "
_LINE_ID_BASE = 1 << 40  # far above the thread ids TensorFlow uses for its lines
_STATS = ("level", "type", "run", "corrected_ns")


class _PlaneWriter:
    """Adds lines, events and their metadata to one XPlane."""

    def __init__(self, plane: Any, origin_ps: int) -> None:
        self.plane = plane
        self.origin_ns = origin_ps // 1000
        self.event_ids: dict[str, int] = {}
        self.next_event = max([*plane.event_metadata.keys(), 0]) + 1
        first_stat = max([*plane.stat_metadata.keys(), 0]) + 1
        self.stat_ids = {name: first_stat + i for i, name in enumerate(_STATS)}
        for name, sid in self.stat_ids.items():
            plane.stat_metadata[sid].id = sid
            plane.stat_metadata[sid].name = f"tf_stitch_{name}"
        self.next_line = _LINE_ID_BASE

    def line(self, name: str) -> Any:
        line = self.plane.lines.add(id=self.next_line, display_id=self.next_line)
        line.name = line.display_name = name
        line.timestamp_ns = self.origin_ns
        self.next_line += 1
        return line

    def event(
        self, line: Any, name: str, start_ps: int, end_ps: int, stats: dict[str, Any]
    ) -> None:
        if name not in self.event_ids:
            eid = self.event_ids[name] = self.next_event
            self.next_event += 1
            metadata = self.plane.event_metadata[eid]
            metadata.id, metadata.name, metadata.display_name = eid, name, name
        event = line.events.add(metadata_id=self.event_ids[name])
        event.offset_ps = start_ps - self.origin_ns * 1000
        event.duration_ps = max(0, end_ps - start_ps)
        for stat, value in stats.items():
            kind = "double_value" if isinstance(value, float) else "str_value"
            event.stats.add(metadata_id=self.stat_ids[stat], **{kind: value})


def add_levels(space: Any, spans: pd.DataFrame, step_start_ps: list[int]) -> int:
    """Adds one line per level (more where a level's spans overlap) to the host plane of the
    XSpace `space`; `step_start_ps[i]` is step i's absolute start in the trace. Returns the
    number of events added."""
    plane = next((p for p in space.planes if p.name == HOST_PLANE_NAME), None)
    if plane is None:
        plane = space.planes.add(name=HOST_PLANE_NAME, id=len(space.planes))
    writer = _PlaneWriter(plane, min(step_start_ps) if step_start_ps else 0)
    added = 0
    for level in LEVELS:
        rows = list(spans[spans.level == level].itertuples())
        starts = [step_start_ps[int(r.step)] + int(r.start_ns * 1000) for r in rows]
        ends = [step_start_ps[int(r.step)] + int(r.end_ns * 1000) for r in rows]
        lanes = assign_lanes(list(zip(starts, ends, strict=True)))
        lines: dict[int, Any] = {}
        for i in sorted(range(len(rows)), key=starts.__getitem__):
            r, lane = rows[i], lanes[i]
            if lane not in lines:
                lines[lane] = writer.line(LINE_PREFIX + level + (f" {lane + 1}" if lane else ""))
            name = f"{r.name} ({r.type})" if level == "op" else str(r.name)
            stats = {
                "level": level,
                "type": str(r.type),
                "run": str(r.run),
                "corrected_ns": float(r.corrected_ns),
            }
            writer.event(lines[lane], name, starts[i], ends[i], stats)
            added += 1
    return added
