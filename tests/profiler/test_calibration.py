"""The cost of one recorded trace event (leveled.calibrate_event_cost), measured directly."""

from __future__ import annotations

import tempfile

import tensorflow as tf

from tf_stitch.profiler.measure import leveled
from tf_stitch.profiler.trace.xplane import host_events
from tf_stitch.runtime import op_library


def test_the_timed_events_are_real_trace_events() -> None:
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        try:
            op_library.time_trace_events(250, name="calibration/probe", op_type="Probe")
        finally:
            tf.profiler.experimental.stop()
        names = [e.name for e in host_events(logdir)]
    assert names.count("calibration/probe:Probe") == 250


def test_recording_costs_more_than_a_level_check() -> None:
    idle = min(op_library.time_trace_events(20_000) for _ in range(3))
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        try:
            recording = min(op_library.time_trace_events(20_000) for _ in range(3))
        finally:
            tf.profiler.experimental.stop()
    # A level check is an atomic load (~1 ns); recording builds a name and queues an event.
    assert recording > 5 * idle, (recording, idle)


def test_calibrated_cost_is_positive_and_plausible() -> None:
    cost = leveled.calibrate_event_cost()
    # Tens of ns to a few us per event on any machine we know of (about 0.1-0.2 us here).
    assert 5.0 < cost < 20_000.0, cost
    assert leveled.calibrate_event_cost() == cost  # cached per process
