"""Lanes for drawing overlapping spans, and time shared between spans that run at once."""

from __future__ import annotations

import itertools

from tf_stitch.profiler.trace import intervals
from tf_stitch.profiler.trace.intervals import assign_lanes, share_overlaps
from tf_stitch.profiler.trace.spans import Span


def test_overlapping_spans_share_their_common_time() -> None:
    a, b, c = (
        Span("op", "a", "", 0, 100),
        Span("op", "b", "", 50, 150),
        Span("op", "c", "", 200, 210),
    )
    share_overlaps([a, b, c])
    assert (a.attributed_ns, b.attributed_ns, c.attributed_ns) == (75.0, 75.0, 10.0)


def test_lanes_never_hold_overlapping_intervals() -> None:
    intervals = [(0.0, 10.0), (5.0, 8.0), (10.0, 12.0), (6.0, 20.0), (9.0, 9.5)]
    lanes = assign_lanes(intervals)
    assert lanes == [0, 1, 0, 2, 1]
    for lane in set(lanes):
        mine = sorted(iv for iv, ln in zip(intervals, lanes, strict=True) if ln == lane)
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(mine))


def test_union_length_and_subtraction() -> None:
    assert intervals.union_ns([(0, 10), (5, 15), (20, 30)]) == 25
    assert intervals.union_ns([]) == 0
    assert intervals.subtract(0, 100, [(20, 70), (60, 80)]) == [(0, 20), (80, 100)]
    assert intervals.subtract(0, 100, [(-5, 200)]) == []
    assert intervals.subtract(0, 100, []) == [(0, 100)]
