"""Run C's kernels placed under run B's op runs by identity (node name and occurrence)."""

from __future__ import annotations

from tf_stitch.profiler.trace.merge import graft_kernels
from tf_stitch.profiler.trace.spans import Span


def _step(op_starts: list[float], kernels: list[tuple[int, float, float]]) -> list[Span]:
    spans = [Span("model", "m", "step", 0.0, 1000.0)]
    for start in op_starts:
        spans.append(Span("op", "k_op", "StitchedKernel", start, start + 100.0, 0))
    for op, start, end in kernels:
        spans.append(Span("kernel", f"kernel_{op}", "row", start, end, op, run="C"))
    return spans


def test_kernels_keep_their_offset_under_the_same_op_run() -> None:
    b = [_step([10.0, 400.0], [])]
    c = [_step([50.0, 300.0], [(1, 60.0, 90.0), (2, 305.0, 450.0)])]
    assert graft_kernels(b, c) == 2
    first, second = (s for s in b[0] if s.level == "kernel")
    assert (first.parent, first.start_ns, first.end_ns, first.run) == (1, 20.0, 50.0, "C")
    # The second run of the op: same offset (5), clipped to the op's end.
    assert (second.parent, second.start_ns, second.end_ns) == (2, 405.0, 500.0)
    assert first.attributed_ns == 30.0


def test_kernels_of_op_runs_run_b_did_not_see_are_left_out() -> None:
    b = [_step([10.0], [])]
    c = [_step([50.0, 300.0], [(2, 305.0, 350.0)])]
    assert graft_kernels(b, c) == 0
