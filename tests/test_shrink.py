"""The shrink step end to end: a group whose row buffers exceed the on-chip budget recomputes
its cheapest buffered values, fits the budget, and still gives the original's answers."""

from __future__ import annotations

import re

import tensorflow as tf
from conftest import assert_close, random_inputs

import tf_stitch

SIG = [tf.TensorSpec([None, 512])]


@tf.function(input_signature=SIG)
def two_buffered_values(x: tf.Tensor) -> tf.Tensor:
    # exp(x - max) and tanh(...) are both read again after their reductions: two row buffers
    # of 512 floats (2 KiB each) when they fit, recomputation when they do not.
    e = tf.exp(x - tf.reduce_max(x, -1, keepdims=True))
    t = tf.tanh(e * 3.0)
    s = tf.reduce_sum(e, -1, keepdims=True) + tf.reduce_sum(t, -1, keepdims=True)
    return e / s + t


def _bytes(explanation: str) -> tuple[int, int | None]:
    match = re.search(r"(\d+) B on chip per block(?: \((\d+) B before shrink)?", explanation)
    assert match, explanation
    return int(match.group(1)), int(match.group(2)) if match.group(2) else None


def test_group_over_budget_is_shrunk_and_stays_correct() -> None:
    roomy = tf_stitch.optimize(two_buffered_values)
    after, before = _bytes(tf_stitch.explain(roomy))
    assert after == 2 * 512 * 4 and before is None  # both buffered under the default 20 KB

    budget = 3000  # room for one buffer only
    tight = tf_stitch.optimize(two_buffered_values, on_chip_budget=budget)
    text = tf_stitch.explain(tight)
    after, before = _bytes(text)
    assert before == 4096 and after <= budget
    assert "shrunk" in text and "recompute" in text
    for batch in (1, 5):
        x = random_inputs(SIG, batch=batch, seed=batch)[0]
        assert_close(two_buffered_values(x), tight(x))
        assert_close(two_buffered_values(x), roomy(x))
