"""bench/latency_ratio.py: tf_stitch's time over TensorFlow's taken round by round, unsure only
where the interval reaches the target, and confirmed by the two alone in alternating order."""

from __future__ import annotations

import pytest

from tf_stitch.bench.latency_ratio import RATIO_TARGET, confirm, paired_ratio, unsure
from tf_stitch.profiler.measure.stability import Estimate
from tf_stitch.profiler.measure.timing import Latency


def _lat(times: list[float]) -> Latency:
    return Latency(sorted(times)[len(times) // 2], min(times), max(times), len(times), tuple(times))


def test_paired_ratio_cancels_drift_that_spreads_each_ones_times() -> None:
    # The machine slows down 3x over the rounds; tf_stitch is 0.8x TensorFlow in every round.
    base = [10.0 * (1 + r / 5) for r in range(11)]
    ratio = paired_ratio(_lat(base), _lat([0.8 * b for b in base]))
    assert ratio.value == pytest.approx(0.8)
    assert ratio.low == pytest.approx(0.8) and ratio.high == pytest.approx(0.8)
    assert ratio.blocks == 11


def test_paired_ratio_needs_the_rounds_of_one_run() -> None:
    with pytest.raises(ValueError, match="per-round"):
        paired_ratio(Latency(1.0, 1.0, 1.0, 3), _lat([1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="per-round"):
        paired_ratio(_lat([1.0, 1.0]), _lat([1.0, 1.0, 1.0]))


def test_unsure_only_above_the_target_within_the_interval() -> None:
    assert not unsure(Estimate(1.0, 0.9, 1.1, 7))  # below: met
    assert unsure(Estimate(1.05, 0.98, 1.12, 7))  # above, but the interval reaches below
    assert not unsure(Estimate(1.2, 1.1, 1.3, 7))  # above, surely: missed
    assert pytest.approx(1.03) == RATIO_TARGET


def test_confirm_alternates_which_goes_first_and_pairs_each_round() -> None:
    order: list[str] = []
    estimate = confirm(lambda: order.append("tf"), lambda: order.append("ts"), rounds=6, warmup=2)
    assert estimate.blocks == 6
    assert order[:4] == ["tf", "ts", "ts", "tf"]
    assert order.count("tf") == order.count("ts") == 8
    assert estimate.low <= estimate.value <= estimate.high
