"""Arithmetic on the intervals of a timeline: lanes for drawing, time shared by spans that run
at once, the length of a union and what is left of an interval without others."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Protocol


class Interval(Protocol):
    start_ns: float
    end_ns: float
    attributed_ns: float


def assign_lanes(intervals: Sequence[tuple[float, float]]) -> list[int]:
    """A lane per (start, end) interval so that intervals in one lane never overlap (greedy in
    order of start; a timeline shows one row per lane)."""
    lane_ends: list[float] = []
    lanes = [0] * len(intervals)
    for i in sorted(range(len(intervals)), key=lambda k: intervals[k][0]):
        start, end = intervals[i]
        for lane, lane_end in enumerate(lane_ends):
            if lane_end <= start:
                lane_ends[lane], lanes[i] = end, lane
                break
        else:
            lane_ends.append(end)
            lanes[i] = len(lane_ends) - 1
    return lanes


def share_overlaps(spans: Sequence[Interval]) -> None:
    """Sets each span's `attributed_ns`: its duration, where k spans of the list run at the same
    time each getting 1/k of that time (ops of two inter-op threads, say), so that the
    attributed times of a level add up to the time the level covers."""
    edges = sorted({t for sp in spans for t in (sp.start_ns, sp.end_ns)})
    for sp in spans:
        sp.attributed_ns = 0.0
    order = sorted(range(len(spans)), key=lambda i: spans[i].start_ns)
    active: list[int] = []
    nxt = 0
    for lo, hi in itertools.pairwise(edges):
        while nxt < len(order) and spans[order[nxt]].start_ns <= lo:
            active.append(order[nxt])
            nxt += 1
        active = [i for i in active if spans[i].end_ns > lo]
        for i in active:
            spans[i].attributed_ns += (hi - lo) / len(active)


def union_ns(intervals: Iterable[tuple[float, float]]) -> float:
    """The length of the union of [start, end) intervals."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        lo = max(start, reach)
        if end > lo:
            total += end - lo
        reach = max(reach, end)
    return total


def subtract(
    start: float, end: float, holes: Sequence[tuple[float, float]]
) -> list[tuple[float, float]]:
    """[start, end) without the union of `holes`, as sorted disjoint intervals."""
    out, at = [], start
    for lo, hi in sorted(holes):
        if lo > at:
            out.append((at, min(lo, end)))
        at = max(at, hi)
        if at >= end:
            break
    if at < end:
        out.append((at, end))
    return [(a, b) for a, b in out if b > a]
