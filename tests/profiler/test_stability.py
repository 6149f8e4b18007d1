"""The confidence intervals and the stability verdict of a leveled profile, on block timings
recorded from real profiles (deterministic: the bootstrap is seeded)."""

from __future__ import annotations

import pytest

from tf_stitch.profiler.measure import stability
from tf_stitch.profiler.measure.leveled import block_medians
from tf_stitch.profiler.measure.stability import Contention, CpuSample, estimate, judge

# Block medians (ms) of run A and run B, 8 blocks of 10 steps, of a small Keras CNN (1.1 ms a
# step) profiled on the 2-vCPU development VM, 2026-12-04: quiet, then with a busy loop on one
# core (`/proc`: other processes took 0.99 CPUs).
QUIET_A = [1.078, 1.076, 1.055, 1.03, 1.149, 0.951, 1.105, 1.067]
QUIET_B = [1.127, 1.094, 0.978, 0.901, 0.861, 1.14, 1.107, 1.091]
BUSY_A = [1.285, 0.974, 1.521, 1.25, 1.062, 1.474, 1.194, 1.229]
BUSY_B = [1.494, 1.226, 1.501, 1.543, 1.223, 1.292, 1.301, 1.296]
HOG = Contention(others=0.99, steal=0.0)


def test_the_interval_is_a_seeded_bootstrap_of_the_median() -> None:
    e = estimate(QUIET_A)
    assert e.value == pytest.approx(1.0715) and e.blocks == 8
    assert e.low <= e.value <= e.high
    assert e == estimate(QUIET_A)  # deterministic
    assert 0.02 < e.half_width < 0.05  # recorded: ±3.5%
    busy = estimate(BUSY_A)
    assert busy.half_width > 2 * e.half_width
    tight = estimate([1.0, 1.001, 0.999, 1.0005, 0.9995, 1.0])
    assert tight.half_width < 0.002 and tight.contains(1.0)
    single = estimate([2.0])
    assert (single.low, single.value, single.high) == (2.0, 2.0, 2.0)
    with pytest.raises(ValueError):
        estimate([])


def test_a_quiet_profile_is_judged_on_its_intervals_and_a_busy_one_is_flagged() -> None:
    quiet = judge(estimate(QUIET_A), QUIET_A, [estimate(QUIET_B)], Contention(0.02, 0.0))
    # The model latency is known to ±3.5%, the traced steps only to ±9%: unstable, saying why.
    assert quiet.unstable and len(quiet.reasons) == 1 and "traced level" in quiet.reasons[0]
    assert "rerun with more steps or on a quiet machine" in quiet.message()
    busy = judge(estimate(BUSY_A), BUSY_A, [estimate(BUSY_B)], HOG)
    assert busy.unstable and any("other processes took 0.99 CPUs" in r for r in busy.reasons)
    assert busy.message().startswith(f"unstable: model latency ±{busy.half_width:.1%}")
    calm = judge(estimate(QUIET_A[:4] * 2), QUIET_A[:4] * 2, [], None)
    assert not calm.unstable and calm.message().startswith("stable: model latency ±")


def test_drift_between_blocks_is_flagged() -> None:
    drifting = [1.0, 1.02, 1.05, 1.09, 1.12, 1.15]
    assert stability.drift(drifting) == pytest.approx((1.15 + 1.12) / (1.0 + 1.02) - 1.0)
    verdict = judge(estimate(drifting), drifting, [], None)
    assert verdict.unstable and any("drifted +" in r for r in verdict.reasons)
    assert stability.drift([1.0, 2.0]) == 0.0  # too few blocks to say


def test_contention_is_what_others_and_the_hypervisor_took() -> None:
    start = CpuSample(busy=100.0, steal=1.0, own=10.0, wall=50.0)
    end = CpuSample(busy=104.0, steal=1.5, own=11.0, wall=52.0)  # 2 s: 4 busy, 1 ours, .5 steal
    c = Contention.between(start, end)
    assert c is not None
    assert c.steal == pytest.approx(0.25) and c.others == pytest.approx(1.25)
    assert Contention.between(None, end) is None and Contention.between(end, start) is None
    sample = stability.cpu_sample()  # this machine's /proc
    assert sample is None or (sample.busy >= sample.own >= 0 and sample.wall > 0)


def test_blocks_are_summarized_by_their_medians() -> None:
    assert block_medians([1.0, 9.0, 2.0, 3.0, 3.0, 4.0], [0, 0, 0, 1, 1, 1]) == [2.0, 3.0]
