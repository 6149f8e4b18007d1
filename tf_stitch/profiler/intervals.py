"""Arithmetic on the intervals of a timeline: lanes for drawing, and time shared by spans that
run at once."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
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
