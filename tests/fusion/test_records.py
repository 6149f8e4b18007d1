"""fusion/decision.py `Records`: one channel for every decision of an optimization, each once,
logged as it is made, printed by explain() as one table."""

from __future__ import annotations

import logging

import pytest
import tensorflow as tf
from graph_helpers import graph_of, spec

from tf_stitch.fusion.decision import Record, RecordKind, Records, allow, forbid
from tf_stitch.fusion.planner import plan_groups


def test_a_record_is_kept_once_and_in_order() -> None:
    a = Record("merge a -> b", forbid("cycle"))
    b = Record("merge b -> c", allow("row"))
    records = Records([a, b, a])
    records.append(Record("merge a -> b", forbid("cycle")))  # equal: the same record
    records.append(Record("merge a -> b", allow("row")))  # a later round decided otherwise
    assert [str(r) for r in records] == [
        "merge a -> b: forbid(cycle)",
        "merge b -> c: allow(row)",
        "merge a -> b: allow(row)",
    ]
    assert len(records) == 3 and records[1] == b


def test_each_new_record_is_logged_once_on_the_fusion_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    records = Records()
    record = Record("kernel k", forbid("nvcc failed"), RecordKind.CUDA)
    with caplog.at_level(logging.DEBUG, logger="tf_stitch.fusion"):
        records.append(record)
        records.append(record)
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("tf_stitch.fusion", "cuda kernel k: forbid(nvcc failed)")
    ]


def test_the_table_aligns_kinds_and_indents_a_reason_of_several_lines() -> None:
    records = Records(
        [
            Record("merge a -> b", allow("row")),
            Record("kernel k", forbid("the compiler failed:\nline 2"), RecordKind.COMPILE),
        ]
    )
    assert records.table() == [
        "plan     merge a -> b: allow(row)",
        "compile  kernel k: forbid(the compiler failed:\n         line 2)",
    ]
    assert Records().table() == []


def test_a_merge_refused_in_every_round_of_the_planner_is_one_record() -> None:
    # Exp -> MatMul is refused, MatMul -> Exp_1 then merges, so the planner goes round again
    # and refuses Exp -> MatMul a second time: one record.
    graph = graph_of(lambda x, w: tf.exp(tf.matmul(tf.exp(x), w)), spec(None, 32), spec(32, 32))
    lines = [str(r) for r in plan_groups(graph).records]
    refused = [line for line in lines if line.startswith("merge Exp -> MatMul: forbid(")]
    assert len(refused) == 1
    assert len(lines) == len(set(lines))


def test_the_memory_plan_of_each_group_is_in_the_records() -> None:
    def fn(x: tf.Tensor) -> tf.Tensor:
        e = tf.exp(x - tf.reduce_max(x, -1, keepdims=True)) * tf.tanh(x)
        return e / tf.reduce_sum(e, -1, keepdims=True)

    plan = plan_groups(graph_of(fn, spec(None, 64)))
    memory = [r for r in plan.records if r.kind is RecordKind.MEMORY]
    (group,) = plan.groups
    assert {r.subject for r in memory} == {
        f"keep {ref} on chip (group {group.id})" for ref in group.memory.decisions
    }
    assert memory, "the softmax's exponentials cross its stages"
