"""Spans of one traced step, built from its host events: layers, ops, library work, kernels.

- **op**: every op the TF executor ran in the step (`node_name:OpType` events);
- **library**: work an op handed to the intra-op thread pool (Eigen / oneDNN on CPU). The op's
  thread records a `ThreadpoolListener::Record` event with a producer id (`_p`); the worker
  that runs the work opens a region (`StartRegion` ... `StopRegion`) with the same id as its
  consumer id (`_c`). A region is joined to the op whose interval holds the matching Record;
- **kernel**: on CPU, a `StitchedKernel` op's run of its generated kernel (the op records a
  `StitchedKernel::Run` event with the kernel's name and schedule at host tracer level 2);
- **layer**: the Keras layer (top name scope below the model's) of the ops. A layer's span is a
  segment: consecutive ops (in start order) of the same layer, from the first one's start to
  the last one's end; a layer whose ops run at separate times (its variable reads at the start
  of the step, say) has several segments, so that no layer span covers another layer's work.
  The step's time before its first op and after its last op are layer-level spans of type
  `framework` (`(framework: call)`, `(framework: return)`): TensorFlow's own cost, not a layer's.

Times are nanoseconds from the step's start. `tracing_events` counts the trace events recorded
inside each span's interval on its threads (what the tracing itself cost there).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tb_plugin import metadata
from tf_stitch.profiler.trace.intervals import share_overlaps
from tf_stitch.profiler.trace.layers import FRAMEWORK_CALL, FRAMEWORK_RETURN, layer_of, model_scope
from tf_stitch.profiler.trace.op_events import op_run_of
from tf_stitch.profiler.trace.xplane import StepInterval, TraceEvent

LEVELS = metadata.LEVELS  # outermost first (tb_plugin/metadata.py owns them)
_RECORD, _START, _STOP = (
    "ThreadpoolListener::Record",
    "ThreadpoolListener::StartRegion",
    "ThreadpoolListener::StopRegion",
)
KERNEL_EVENT = "StitchedKernel::Run"  # recorded by the op (runtime/op/kernel_cpu.cc)


@dataclass
class Span:
    """One span of a step tree. `parent` is the index of the parent span in the step's list
    (-1 for the root); `thread` is the trace line it ran on ("" for synthesized spans)."""

    level: str
    name: str
    type: str
    start_ns: float
    end_ns: float
    parent: int = -1
    thread: str = ""
    tracing_events: int = 0
    attributed_ns: float = 0.0  # its duration, time shared with same-level spans split evenly
    run: str = "B"  # the leveled run it was measured in
    cpu_ns: float | None = None  # estimated CPU time on its thread (`thread_cpu`); None: unknown

    @property
    def duration_ns(self) -> float:
        return self.end_ns - self.start_ns


def _rel_ns(t_ps: int, step: StepInterval) -> float:
    return (t_ps - step.start_ps) / 1000.0


def _op_finder(ops: list[tuple[Span, TraceEvent]]) -> Callable[[str, int], int | None]:
    """`find(line, t_ps)`: the index of the first op (in `ops`' order) on trace line `line`
    whose interval holds `t_ps`, or None. Ops are looked up by bisection on their line."""
    by_line: dict[str, list[tuple[int, int]]] = {}  # line -> [(start_ps, op index)] sorted
    for i, (_, ev) in enumerate(ops):
        by_line.setdefault(ev.line, []).append((ev.start_ps, i))
    for entries in by_line.values():
        entries.sort()
    starts = {line: [start for start, _ in entries] for line, entries in by_line.items()}
    reach: dict[str, list[int]] = {}  # line -> running max of the ops' ends, in start order
    for line, entries in by_line.items():
        ends, high = [], -1
        for _, i in entries:
            high = max(high, ops[i][1].end_ps)
            ends.append(high)
        reach[line] = ends

    def find(line: str, t_ps: int) -> int | None:
        entries = by_line.get(line)
        if not entries:
            return None
        holders = []
        j = bisect.bisect_right(starts[line], t_ps) - 1
        # Walk back only while an earlier op could still reach t (ops on a thread rarely nest).
        while j >= 0 and reach[line][j] > t_ps:
            _, i = entries[j]
            if ops[i][1].end_ps > t_ps:
                holders.append(i)
            j -= 1
        return min(holders) if holders else None

    return find


def _library_spans(
    events: Sequence[TraceEvent], step: StepInterval, ops: list[tuple[Span, TraceEvent]]
) -> list[Span]:
    """Worker-thread regions of the step, each parented to the op that scheduled it."""
    op_at = _op_finder(ops)
    producer_op: dict[int, int] = {}
    for ev in events:
        if ev.name == _RECORD and "_p" in ev.stats:
            i = op_at(ev.line, ev.start_ps)
            if i is not None:
                producer_op[int(ev.stats["_p"])] = i
    out: list[Span] = []
    open_regions: dict[str, tuple[int, int]] = {}  # line -> (op index, start)
    for ev in events:
        if ev.name == _START and "_c" in ev.stats:
            op = producer_op.get(int(ev.stats["_c"]))
            if op is not None:
                open_regions[ev.line] = (op, ev.start_ps)
        elif ev.name == _STOP and ev.line in open_regions:
            op, start = open_regions.pop(ev.line)
            parent, op_ev = ops[op]
            lo, hi = max(start, op_ev.start_ps), min(ev.start_ps, op_ev.end_ps)
            if hi > lo:
                kind = "oneDNN" if op_ev.display_name.startswith("_Mkl") else "Eigen"
                out.append(
                    Span(
                        "library",
                        f"{parent.name} work",
                        kind,
                        _rel_ns(lo, step),
                        _rel_ns(hi, step),
                        op,
                        ev.line,
                    )
                )
    return out


def _kernel_spans(
    events: Sequence[TraceEvent], step: StepInterval, ops: list[tuple[Span, TraceEvent]]
) -> list[Span]:
    """`StitchedKernel` runs (the op's own trace event, host tracer level 2), each parented to
    the op that ran it (the op event on its thread that holds it)."""
    op_at = _op_finder(ops)
    out: list[Span] = []
    for ev in events:
        if ev.name != KERNEL_EVENT:
            continue
        i = op_at(ev.line, ev.start_ps)
        if i is None:
            continue
        name = str(ev.stats.get("kernel", "kernel"))
        kind = str(ev.stats.get("schedule", "")) or "StitchedKernel"
        end = min(ev.end_ps, ops[i][1].end_ps)
        out.append(
            Span("kernel", name, kind, _rel_ns(ev.start_ps, step), _rel_ns(end, step), i, ev.line)
        )
    return out


def _device_kernel_spans(
    kernels: Sequence[tuple[TraceEvent, str]], step: StepInterval, spans: list[Span]
) -> list[Span]:
    """GPU kernels of the step, each parented to the latest run of its op that started before
    it; the op and its layer are stretched to cover the kernel (it runs after its launch)."""
    runs: dict[str, list[int]] = {}
    for i, s in enumerate(spans):
        if s.level == "op":
            runs.setdefault(s.name, []).append(i)
    root_end = spans[0].end_ns
    out: list[Span] = []
    for ev, node in kernels:
        if not step.contains(ev.start_ps) or node not in runs:
            continue
        start = _rel_ns(ev.start_ps, step)
        before = [i for i in runs[node] if spans[i].start_ns <= start]
        op = before[-1] if before else runs[node][0]
        end = min(_rel_ns(ev.end_ps, step), root_end)
        out.append(Span("kernel", ev.name, "GPU kernel", start, end, op, ev.line))
        for i in (op, spans[op].parent):
            spans[i].start_ns = min(spans[i].start_ns, start)
            spans[i].end_ns = max(spans[i].end_ns, end)
    return out


def step_spans(
    events: Sequence[TraceEvent],
    step: StepInterval,
    layer_names: Callable[[str], str] | None = None,
    device_kernels: Sequence[tuple[TraceEvent, str]] = (),
) -> list[Span]:
    """The model, layer, op, library and kernel spans of one step, parents before children.
    `device_kernels` are GPU kernels with their launching op's node (`gpu_kernels.py`)."""
    inside = [e for e in events if step.contains(e.start_ps) and e.end_ps <= step.end_ps]
    op_events = [(e, r) for e in inside if (r := op_run_of(e)) is not None and r.node]
    scope = model_scope([r.node for _, r in op_events])
    root = Span(
        "model",
        scope or "model",
        "step",
        0.0,
        _rel_ns(step.end_ps, step),
        tracing_events=len(inside),
    )
    ops = [
        (
            Span(
                "op",
                run.node,
                run.op,
                _rel_ns(ev.start_ps, step),
                _rel_ns(ev.end_ps, step),
                thread=ev.line,
            ),
            ev,
        )
        for ev, run in op_events
    ]
    names = [layer_of(run.node, scope, layer_names) for _, run in op_events]
    spans = [root]
    if ops:  # the step's time before its first op: the call's dispatch, inputs, executor start
        spans.append(Span("layer", FRAMEWORK_CALL, "framework", 0.0, ops[0][0].start_ns, 0))
    current = -1  # index in `spans` of the layer segment being extended
    for (op, _), layer in zip(ops, names, strict=True):
        if current < 0 or spans[current].name != layer:
            current = len(spans)
            spans.append(Span("layer", layer, "layer", op.start_ns, op.end_ns, parent=0))
        segment = spans[current]
        segment.end_ns = max(segment.end_ns, op.end_ns)
        op.parent = current
    if ops:  # ... and after its last op: outputs handed back, the executor's end
        last = max(op.end_ns for op, _ in ops)
        spans.append(Span("layer", FRAMEWORK_RETURN, "framework", last, root.end_ns, 0))
    first_op = len(spans)  # layer segments were opened in start order: already sorted
    spans.extend(op for op, _ in ops)
    for lib in _library_spans(inside, step, ops):
        lib.parent += first_op
        spans.append(lib)
    for kernel in _kernel_spans(inside, step, ops):
        kernel.parent += first_op
        spans.append(kernel)
    spans += _device_kernel_spans(device_kernels, step, spans)
    _count_tracing_events(spans, inside, step)
    for level in LEVELS:
        share_overlaps([sp for sp in spans if sp.level == level])
    return spans


def _count_tracing_events(
    spans: list[Span], events: Sequence[TraceEvent], step: StepInterval
) -> None:
    """Trace events recorded inside each span (what tracing cost it): library work, on its
    worker thread; an op, on its thread plus its library work's; a layer, on its ops' threads
    over its interval plus its ops' library work's; framework spans, on every thread."""
    starts: dict[str, list[float]] = {}
    for ev in events:
        starts.setdefault(ev.line, []).append(_rel_ns(ev.start_ps, step))
    for line_starts in starts.values():
        line_starts.sort()

    def count(line: str, lo: float, hi: float) -> int:
        xs = starts.get(line, [])
        return bisect.bisect_left(xs, hi) - bisect.bisect_left(xs, lo)

    library: dict[int, int] = {}  # op index -> events of its library work
    for s in spans:
        if s.level == "kernel":
            s.tracing_events = count(s.thread, s.start_ns, s.end_ns)
        if s.level == "library":
            s.tracing_events = count(s.thread, s.start_ns, s.end_ns)
            library[s.parent] = library.get(s.parent, 0) + s.tracing_events
    layer_lines: dict[int, set[str]] = {}
    layer_library: dict[int, int] = {}
    for i, s in enumerate(spans):
        if s.level == "op":
            s.tracing_events = count(s.thread, s.start_ns, s.end_ns) + library.get(i, 0)
            layer_lines.setdefault(s.parent, set()).add(s.thread)
            layer_library[s.parent] = layer_library.get(s.parent, 0) + library.get(i, 0)
    for i, s in enumerate(spans):
        if s.level != "layer":
            continue
        lines = starts.keys() if s.type == "framework" else layer_lines.get(i, set())
        own = sum(count(line, s.start_ns, s.end_ns) for line in lines)
        s.tracing_events = own + layer_library.get(i, 0)
