"""GPU kernels of a traced step (the profiler's device tracer, CUPTI), joined to the TF op that
launched each one.

A kernel event of a `/device:GPU:N` plane is joined to its op by, in order: its `tf_op` stat
(`node:OpType`); its kernel annotation (TensorFlow's ScopedAnnotation stack at launch time,
`outer::node:OpType`, with `#k=v#` arguments); or its `correlation_id`, which the launch call
(cudaLaunchKernel, cuLaunchKernel) on the host carries too: the op is the one whose host event
holds the launch. A kernel runs after its launch, so its op span (and the op's layer) is
stretched to cover it; the step marker, which synchronizes the GPU, holds them all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from tf_stitch.profiler.trace.op_events import op_run_of
from tf_stitch.profiler.trace.xplane import (
    TraceEvent,
    find_xplane_files,
    load_xspace,
    plane_events,
)

DEVICE_PLANE = re.compile(r"^/device:GPU:\d+$")
_ANNOTATION_STATS = ("kernel_annotation", "kernel annotation", "annotation")
_ENCODED_ARGS = re.compile(r"#.*?#")


def trace_events(source: str | Path) -> tuple[list[TraceEvent], list[TraceEvent]]:
    """(device kernel events of every GPU plane, events of every other plane) of the xplane
    files under `source`; device lines are named `<plane>/<line>`."""
    device: list[TraceEvent] = []
    other: list[TraceEvent] = []
    for f in find_xplane_files(source):
        for plane in load_xspace(f).planes:
            events = plane_events(plane)
            if DEVICE_PLANE.match(plane.name):
                device += [
                    TraceEvent(
                        e.name,
                        e.display_name,
                        f"{plane.name}/{e.line}",
                        e.start_ps,
                        e.duration_ps,
                        e.stats,
                    )
                    for e in events
                ]
            else:
                other += events
    return device, other


def _node_of_op_name(text: str) -> str | None:
    """`node` of an op annotation `node:OpType` (the innermost of a `::` stack)."""
    last = _ENCODED_ARGS.sub("", text).split("::")[-1].strip()
    node, sep, op = last.rpartition(":")
    return node if sep and node and op and not op.startswith("/") else None


def link_kernels(
    device: Sequence[TraceEvent], host: Sequence[TraceEvent]
) -> list[tuple[TraceEvent, str]]:
    """(kernel event, launching op's node name) for every device kernel whose op is known."""
    launches: dict[int, TraceEvent] = {}
    for e in host:
        cid = e.stats.get("correlation_id")
        if isinstance(cid, int) and op_run_of(e) is None:
            launches.setdefault(cid, e)
    ops = [(e, r.node) for e in host if (r := op_run_of(e)) is not None and r.node]
    linked: list[tuple[TraceEvent, str]] = []
    for k in device:
        node = _node_from_stats(k)
        if node is None and isinstance(k.stats.get("correlation_id"), int):
            launch = launches.get(int(k.stats["correlation_id"]))
            node = _op_holding(launch, ops) if launch is not None else None
        if node is not None:
            linked.append((k, node))
    return linked


def _node_from_stats(kernel: TraceEvent) -> str | None:
    tf_op = kernel.stats.get("tf_op")
    if isinstance(tf_op, str) and (node := _node_of_op_name(tf_op)):
        return node
    for stat in _ANNOTATION_STATS:
        text = kernel.stats.get(stat)
        if isinstance(text, str) and (node := _node_of_op_name(text)):
            return node
    return None


def _op_holding(launch: TraceEvent, ops: Iterable[tuple[TraceEvent, str]]) -> str | None:
    """The innermost op whose host event holds the launch (same thread preferred)."""
    holding = [(e, n) for e, n in ops if e.start_ps <= launch.start_ps < e.end_ps]
    if not holding:
        return None
    same = [(e, n) for e, n in holding if e.line == launch.line] or holding
    return min(same, key=lambda en: en[0].duration_ps)[1]
