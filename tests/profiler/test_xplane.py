"""Tests for reading TensorFlow profiler XPlane files."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import tensorflow as tf
from tensorflow.tsl.profiler.protobuf import xplane_pb2

from tf_stitch.profiler.trace.xplane import (
    HOST_PLANE_NAME,
    StepInterval,
    TraceEvent,
    find_xplane_files,
    host_events,
    step_intervals,
)

OPTIONS = dict(host_tracer_level=2, python_tracer_level=0, device_tracer_level=0)


def _add_stat(event, metadata_id: int, **value) -> None:
    stat = event.stats.add()
    stat.metadata_id = metadata_id
    for k, v in value.items():
        setattr(stat, k, v)


def _synthetic_space() -> xplane_pb2.XSpace:
    """A host plane with two lines (a step marker and two ops) and a device plane."""
    space = xplane_pb2.XSpace()
    host = space.planes.add(id=1, name=HOST_PLANE_NAME)
    for sid, name in [(1, "step_num"), (2, "_r"), (3, "eager_op"), (4, "MatMul"), (5, "flops")]:
        host.stat_metadata[sid].id = sid
        host.stat_metadata[sid].name = name
    for mid, name, disp in [(1, "step", ""), (2, "mm:MatMul", "MatMul"), (3, "EagerExecute", "")]:
        host.event_metadata[mid].id = mid
        host.event_metadata[mid].name = name
        host.event_metadata[mid].display_name = disp
    _add_stat(host.event_metadata[2], 5, double_value=2.5)  # a metadata-level stat

    python = host.lines.add(id=1, name="python", timestamp_ns=5)
    step = python.events.add(metadata_id=1, offset_ps=1_000, duration_ps=10_000)
    _add_stat(step, 1, int64_value=7)
    _add_stat(step, 2, int64_value=1)
    eager = python.events.add(metadata_id=3, offset_ps=2_000, duration_ps=100)
    _add_stat(eager, 3, ref_value=4)

    compute = host.lines.add(id=2, name="tf_Compute/123", timestamp_ns=6)
    compute.events.add(metadata_id=2, offset_ps=500, duration_ps=300)

    device = space.planes.add(id=2, name="/device:GPU:0")
    device.event_metadata[1].name = "kernel"
    device.lines.add(id=1, name="stream").events.add(metadata_id=1, offset_ps=0, duration_ps=1)
    return space


def _write(space: xplane_pb2.XSpace, logdir: Path) -> Path:
    run = logdir / "plugins" / "profile" / "2024_01_01_00_00_00"
    run.mkdir(parents=True)
    path = run / "host.xplane.pb"
    path.write_bytes(space.SerializeToString())
    return path


def test_synthetic_space_absolute_times_and_stats(tmp_path: Path) -> None:
    path = _write(_synthetic_space(), tmp_path)
    assert find_xplane_files(tmp_path) == [path]
    events = host_events(tmp_path)
    assert [e.name for e in events] == ["step", "mm:MatMul", "EagerExecute"]
    step, op, eager = events
    assert (step.start_ps, step.end_ps, step.line) == (6_000, 16_000, "python")
    assert step.stats == {"step_num": 7, "_r": 1}
    assert (eager.start_ps, eager.stats) == (7_000, {"eager_op": "MatMul"})  # ref_value resolved
    assert op == TraceEvent(
        name="mm:MatMul",
        display_name="MatMul",
        line="tf_Compute/123",
        start_ps=6_500,
        duration_ps=300,
        stats={"flops": 2.5},
    )
    assert host_events(path) == events
    assert step_intervals(events) == [StepInterval(7, 6_000, 16_000)]
    assert step_intervals(events, name="train") == []


def test_missing_files_raise(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        host_events(tmp_path)


def test_real_trace_step_intervals(tmp_path: Path) -> None:
    @tf.function
    def f(x):
        return tf.tanh(x) * 2.0

    x = tf.ones([16, 16])
    f(x)
    tf.profiler.experimental.start(
        str(tmp_path), options=tf.profiler.experimental.ProfilerOptions(**OPTIONS)
    )
    try:
        for i in range(3):
            with tf.profiler.experimental.Trace("step", step_num=i, _r=1):
                f(x)
    finally:
        tf.profiler.experimental.stop()

    files = find_xplane_files(tmp_path)
    assert files and all(p.parent.parent.name == "profile" for p in files)
    events = host_events(tmp_path)
    steps = step_intervals(events, name="step")
    assert [s.step_num for s in steps] == [0, 1, 2]
    assert all(a.end_ps <= b.start_ps for a, b in itertools.pairwise(steps))
    ops = [e for e in events if e.display_name in ("Tanh", "Mul") and ":" in e.name]
    assert len(ops) == 6
    for step in steps:
        inside = [e.display_name for e in ops if step.contains(e.start_ps)]
        assert sorted(inside) == ["Mul", "Tanh"]
