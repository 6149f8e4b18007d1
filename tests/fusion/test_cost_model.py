"""The schedule cost model: unit costs and its choice of split on a few shapes."""

from __future__ import annotations

import pytest

from tf_stitch.fusion.cost_model import (
    MATMUL_MACS_PER_CYCLE,
    Target,
    choose_loop_split,
    split_cost,
    unit_cycles,
)

TWO = Target(cores=2)


def test_unit_cycles_grow_with_the_row_the_ops_the_matmul_and_the_rows_per_unit() -> None:
    base = unit_cycles(250, 5)
    assert unit_cycles(500, 5) == 2 * base
    assert unit_cycles(250, 50) > base
    assert unit_cycles(250, 5, macs=MATMUL_MACS_PER_CYCLE * 1000) == base + 1000
    assert unit_cycles(250, 5, rows=5) == 5 * base
    assert unit_cycles(0, 0) == 1  # never zero: ParallelFor reads 0 as free


@pytest.mark.parametrize(
    ("domain", "chosen", "why"),
    [
        ((None, 768), 1, "a batch of vector-length rows: one row per unit"),
        ((8192, 256), 1, "many long rows"),
        ((4, 8), 0, "a tiny domain: one unit, no dispatch per row"),
        ((None, 3), 0, "rows shorter than a vector: fill the vectors instead"),
        ((3, 100_000), 1, "few long rows: each unit still vectorizes"),
        ((3, 64, 4096), 2, "three units would leave a core idle half the time"),
    ],
)
def test_the_fastest_valid_split_is_chosen(domain: tuple, chosen: int, why: str) -> None:
    valid = list(range(len(domain) + 1))
    assert choose_loop_split(domain, valid, op_cost=4, target=TWO) == chosen, why


def test_only_valid_splits_are_chosen() -> None:
    assert choose_loop_split((8192, 256), [0, 2], op_cost=4, target=TWO) in (0, 2)
    assert choose_loop_split((8192, 256), [], op_cost=4, target=TWO) == 2  # the whole row


def test_more_cores_favour_more_units() -> None:
    few, many = Target(cores=1), Target(cores=64)
    domain = (16, 64, 64)
    assert split_cost(domain, 1, 4, many).cycles < split_cost(domain, 0, 4, many).cycles
    assert split_cost(domain, 0, 4, few).cycles <= split_cost(domain, 1, 4, few).cycles


def test_too_little_work_to_wake_a_core_runs_as_one_unit() -> None:
    # 4 rows of 32 on two cores would pay a thread wake-up for ~300 cycles of work
    assert choose_loop_split((4, 32), [0, 1, 2], op_cost=17, target=TWO) == 0
    assert choose_loop_split((4096, 32), [0, 1, 2], op_cost=17, target=TWO) == 1


def test_output_cycles_and_sharing_a_core() -> None:
    from tf_stitch.fusion.cost_model import (
        PARALLEL_MIN_CYCLES,
        ROW_GUESS,
        output_cycles,
        shares_a_core,
    )

    assert output_cycles([(4, 8), (8,)]) == 40
    assert output_cycles([(None, 8)]) == ROW_GUESS * 8  # an unknown batch is guessed
    assert output_cycles([(4,), None]) > PARALLEL_MIN_CYCLES  # an unknown rank: not small
    assert shares_a_core([PARALLEL_MIN_CYCLES // 2, PARALLEL_MIN_CYCLES // 2])
    assert not shares_a_core([PARALLEL_MIN_CYCLES, 1])
