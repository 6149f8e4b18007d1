"""Reading the `*.xplane.pb` files written by the TensorFlow profiler.

`tf.profiler.experimental.start(logdir)` ... `stop()` writes one XSpace protobuf per host to
`logdir/plugins/profile/<run>/<host>.xplane.pb`. An XSpace holds planes (one per device plus
`/host:CPU` for host-side TraceMe events); a plane holds lines (one per thread) of events. Event
names and stat names live in per-plane metadata tables; this module flattens all of that into
plain `TraceEvent` records with absolute timestamps in picoseconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tensorflow.tsl.profiler.protobuf import xplane_pb2

HOST_PLANE_NAME = "/host:CPU"
"""Name of the plane holding host-side events (TF executor ops, eager ops, Python markers)."""

XPLANE_SUFFIX = ".xplane.pb"

StatValue = int | float | str | bytes


@dataclass(frozen=True)
class TraceEvent:
    """One timed event of a trace line; timestamps are absolute, in picoseconds."""

    name: str
    display_name: str
    line: str
    start_ps: int
    duration_ps: int
    stats: dict[str, StatValue] = field(default_factory=dict)

    @property
    def end_ps(self) -> int:
        """The (exclusive) end of the event."""
        return self.start_ps + self.duration_ps


@dataclass(frozen=True)
class StepInterval:
    """The [start_ps, end_ps) span of one step marker."""

    step_num: int
    start_ps: int
    end_ps: int

    def contains(self, t_ps: int) -> bool:
        """Whether the timestamp lies inside the half-open interval."""
        return self.start_ps <= t_ps < self.end_ps


def find_xplane_files(logdir: str | Path) -> list[Path]:
    """All `*.xplane.pb` files below `logdir`, sorted by path."""
    return sorted(Path(logdir).rglob(f"*{XPLANE_SUFFIX}"))


def load_xspace(path: str | Path) -> Any:
    """Parse one `*.xplane.pb` file into an `XSpace` protobuf message."""
    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(path).read_bytes())
    return space


def _stat_value(stat: Any, stat_names: Mapping[int, str]) -> StatValue:
    """The Python value of an XStat; a `ref_value` is resolved to the referenced name."""
    kind = stat.WhichOneof("value")
    if kind is None:
        return 0
    if kind == "ref_value":
        return stat_names.get(stat.ref_value, str(stat.ref_value))
    value: StatValue = getattr(stat, kind)
    return value


def _decode_stats(stats: Iterable[Any], stat_names: Mapping[int, str]) -> dict[str, StatValue]:
    return {
        stat_names.get(s.metadata_id, str(s.metadata_id)): _stat_value(s, stat_names) for s in stats
    }


def plane_events(plane: Any) -> list[TraceEvent]:
    """All timed events of one XPlane, sorted by start time.

    Each event's stats are the union of its metadata's stats and its own (the latter win).
    Aggregated events (with `num_occurrences` instead of an offset) carry no timestamp and are
    skipped.
    """
    stat_names = {k: md.name for k, md in plane.stat_metadata.items()}
    events: list[TraceEvent] = []
    for line in plane.lines:
        line_name = line.display_name or line.name
        base_ps = line.timestamp_ns * 1000
        for ev in line.events:
            if ev.WhichOneof("data") == "num_occurrences":
                continue
            md = plane.event_metadata[ev.metadata_id]
            stats = _decode_stats(md.stats, stat_names)
            stats.update(_decode_stats(ev.stats, stat_names))
            events.append(
                TraceEvent(
                    name=md.name,
                    display_name=md.display_name,
                    line=line_name,
                    start_ps=base_ps + ev.offset_ps,
                    duration_ps=ev.duration_ps,
                    stats=stats,
                )
            )
    events.sort(key=lambda e: (e.start_ps, -e.duration_ps))
    return events


def host_events(source: str | Path | Iterable[str | Path]) -> list[TraceEvent]:
    """All events of the host plane(s) of a profile, sorted by start time.

    `source` is a profiler logdir (searched recursively for `*.xplane.pb`), a single xplane file
    or an iterable of xplane files. Every `/host:CPU` plane of every file is included.
    """
    if isinstance(source, str | Path):
        path = Path(source)
        files = find_xplane_files(path) if path.is_dir() else [path]
    else:
        files = [Path(p) for p in source]
    if not files:
        raise FileNotFoundError(f"no {XPLANE_SUFFIX} files found in {source}")
    events: list[TraceEvent] = []
    for f in files:
        for plane in load_xspace(f).planes:
            if plane.name == HOST_PLANE_NAME:
                events.extend(plane_events(plane))
    events.sort(key=lambda e: (e.start_ps, -e.duration_ps))
    return events


def profile_start_ns(logdir: str | Path) -> int | None:
    """When the profiling session of the xplane files in `logdir` started, in nanoseconds since
    the epoch (the `profile_start_time` stat of the "Task Environment" plane; host event times
    count from it), or None if no file records it."""
    for f in find_xplane_files(logdir):
        for plane in load_xspace(f).planes:
            names = {k: md.name for k, md in plane.stat_metadata.items()}
            for stat in plane.stats:
                if names.get(stat.metadata_id) == "profile_start_time":
                    return int(_stat_value(stat, names))
    return None


def _as_int(value: StatValue) -> int:
    try:
        return int(value)
    except ValueError:
        return -1


def is_step_marker(event: TraceEvent, name: str | None = None) -> bool:
    """Whether `event` is a step marker: a root TraceMe (`_r=1`) carrying a `step_num` stat.

    Such events come from `tf.profiler.experimental.Trace(name, step_num=i, _r=1)`. When
    `name` is given, the event must also have that name.
    """
    if "step_num" not in event.stats or event.stats.get("_r") != 1:
        return False
    return name is None or event.name == name


def step_intervals(events: Iterable[TraceEvent], name: str | None = None) -> list[StepInterval]:
    """The [start, end) interval of every step marker among `events`, sorted by start time.

    See `is_step_marker` for what counts as a marker. The step number is taken from the
    marker's `step_num` stat.
    """
    out = []
    for ev in events:
        if is_step_marker(ev, name):
            out.append(StepInterval(_as_int(ev.stats["step_num"]), ev.start_ps, ev.end_ps))
    out.sort(key=lambda s: s.start_ps)
    return out
