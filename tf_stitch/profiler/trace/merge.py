"""Spans measured in different runs brought into one tree, matched by identity (XSP): run C's
kernels under run B's ops."""

from __future__ import annotations

from tf_stitch.profiler.trace.intervals import share_overlaps
from tf_stitch.profiler.trace.spans import Span


def graft_kernels(into: list[list[Span]], source: list[list[Span]]) -> int:
    """Places the StitchedKernel spans of another run's steps (`source`, run C) under the same
    op runs of `into`'s steps (run B), matched by identity: the op's node name and which run of
    that node in the step it is. Each keeps its offset from its op's start and its duration
    (clipped to the op). Returns how many were placed."""
    placed = 0
    for target, spans in zip(into, source, strict=False):
        index = _op_runs(target)
        key_of = {i: key for key, i in _op_runs(spans).items()}
        for k in spans:
            if k.level != "kernel" or k.type == "GPU kernel" or k.parent not in key_of:
                continue
            op_c = spans[k.parent]
            b = index.get(key_of[k.parent])
            if b is None:
                continue
            op = target[b]
            start = min(op.start_ns + (k.start_ns - op_c.start_ns), op.end_ns)
            end = min(start + k.duration_ns, op.end_ns)
            target.append(
                Span("kernel", k.name, k.type, start, end, b, k.thread, k.tracing_events, run=k.run)
            )
            placed += 1
        share_overlaps([s for s in target if s.level == "kernel"])
    return placed


def _op_runs(spans: list[Span]) -> dict[tuple[str, int], int]:
    """(node name, which run of it in the step) -> index, for the op spans of a step."""
    seen: dict[str, int] = {}
    out = {}
    for i, s in enumerate(spans):
        if s.level == "op":
            seen[s.name] = seen.get(s.name, -1) + 1
            out[(s.name, seen[s.name])] = i
    return out
