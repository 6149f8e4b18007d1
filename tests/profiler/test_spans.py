"""Spans of one traced step from hand-made host events: layer segments, framework spans,
library work joined to its op by producer id, tracing-event counts."""

from __future__ import annotations

import pytest

from tf_stitch.profiler.measure.leveled import trimmed_mean
from tf_stitch.profiler.trace.layers import FRAMEWORK_CALL, FRAMEWORK_RETURN, keras_layer_names
from tf_stitch.profiler.trace.spans import step_spans
from tf_stitch.profiler.trace.xplane import StepInterval, TraceEvent

US = 1_000_000  # picoseconds in a microsecond
COMPUTE, WORKER = "tf_Compute/1", "tf_numa_-1_Eigen/2"


def _op(node: str, op: str, start_us: float, end_us: float, line: str = COMPUTE) -> TraceEvent:
    return TraceEvent(f"{node}:{op}", op, line, int(start_us * US), int((end_us - start_us) * US))


def _ev(name: str, line: str, t_us: float, dur_us: float = 0.0, **stats: int) -> TraceEvent:
    return TraceEvent(name, "", line, int(t_us * US), int(dur_us * US), dict(stats))


STEP = StepInterval(0, 0, 1000 * US)
EVENTS = [
    _op("m_1/conv_1/ReadVariableOp", "ReadVariableOp", 100, 101),
    _op("m_1/conv_1/Conv2D", "_MklNativeConv2D", 110, 400),
    _ev("ThreadpoolListener::Record", COMPUTE, 120, _p=7),
    _ev("ThreadpoolListener::StartRegion", WORKER, 130, _c=7),
    _ev("ThreadpoolListener::StopRegion", WORKER, 390),
    _op("m_1/relu_1/Relu", "Relu", 405, 500),
    _op("m_1/conv_1/Add", "AddV2", 505, 600),
    _ev("ThreadpoolListener::Record", "python", 50, _p=9),  # not inside any op
    _ev("ThreadpoolListener::StartRegion", WORKER, 610, _c=9),
    _ev("ThreadpoolListener::StopRegion", WORKER, 620),
]


def test_layers_are_segments_of_consecutive_ops_with_framework_time_around_them() -> None:
    spans = step_spans(EVENTS, STEP, keras_layer_names(_Model(["conv", "relu"])))
    layers = [
        (s.name, s.type, s.start_ns / 1e3, s.end_ns / 1e3) for s in spans if s.level == "layer"
    ]
    assert layers == [
        (FRAMEWORK_CALL, "framework", 0.0, 100.0),
        ("conv", "layer", 100.0, 400.0),
        ("relu", "layer", 405.0, 500.0),
        ("conv", "layer", 505.0, 600.0),
        (FRAMEWORK_RETURN, "framework", 600.0, 1000.0),
    ]
    root = spans[0]
    assert (root.level, root.name, root.end_ns) == ("model", "m_1", 1000 * 1e3)
    for s in spans[1:]:  # every child lies inside its parent
        p = spans[s.parent]
        assert p.start_ns <= s.start_ns and s.end_ns <= p.end_ns, (s, p)
    ops = [s for s in spans if s.level == "op"]
    assert [spans[o.parent].name for o in ops] == ["conv", "conv", "relu", "conv"]


def test_library_work_is_joined_to_the_op_that_scheduled_it() -> None:
    spans = step_spans(EVENTS, STEP)
    (lib,) = [s for s in spans if s.level == "library"]  # region 9 has no producing op
    assert spans[lib.parent].name == "m_1/conv_1/Conv2D"
    assert (lib.type, lib.thread, lib.start_ns / 1e3, lib.end_ns / 1e3) == (
        "oneDNN",
        WORKER,
        130.0,
        390.0,
    )


def test_tracing_events_are_counted_inside_each_span() -> None:
    spans = step_spans(EVENTS, STEP)
    conv_op = next(s for s in spans if s.name == "m_1/conv_1/Conv2D")
    # The op event itself and its Record on its thread, the StartRegion of its library work.
    assert conv_op.tracing_events == 3
    (lib,) = [s for s in spans if s.level == "library"]
    assert lib.tracing_events == 1
    assert spans[0].tracing_events == len(EVENTS)


def test_trimmed_mean_drops_a_tenth_from_each_end() -> None:
    assert trimmed_mean([1.0] * 8 + [100.0, -100.0]) == 1.0
    assert trimmed_mean([3.0]) == 3.0
    with pytest.raises(ValueError):
        trimmed_mean([])


class _Layer:
    def __init__(self, name: str) -> None:
        self.name = name


class _Model:
    def __init__(self, names: list[str]) -> None:
        self.layers = [_Layer(n) for n in names]
