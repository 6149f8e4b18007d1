"""The schedule cost model, in one place: how long a unit of work takes, and which split of an
elementwise group's domain into units is fastest.

A unit of work (a row, or a block of rows) costs a fixed overhead (the loop setup and the
dispatch) plus its elements times the cycles per element: the ops' costs and the memory
traffic, divided by how well the row fills a vector (rows shorter than a vector waste lanes).
Units run `cores` at a time when there is enough work to wake the other cores. The constants
are calibrated on this project's kernels on one Sapphire Rapids core (layer norm + GELU and
LSTM-gate kernels: about 2 and 4.5 cycles per element; the matmul tile: about 35
multiply-adds per cycle).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Dims = tuple[int | None, ...]

CYCLES_PER_COST = 0.06  # per element, per unit of op cost (op_kinds costs)
CYCLES_PER_ELEMENT = 1.0  # per element: loads, stores, loop
MATMUL_MACS_PER_CYCLE = 32  # the matmul tile (cpu_matmul.h)
VECTOR_ELEMENTS = 16  # float32 lanes of a vector (AVX-512)
UNIT_OVERHEAD_CYCLES = 50.0  # per unit of work: loop setup, row offsets
# Less work than this runs on one core: waking a thread of the pool costs about as much.
PARALLEL_MIN_CYCLES = 40_000
# The size assumed for an axis unknown until run time (a batch), wherever it falls.
ROW_GUESS = 256
# Units a column kernel (a reduction over outer axes) runs together, one per lane: a buffered
# value then takes this many rows. Two cache lines of floats per row: on the 2-core dev VM,
# batch statistics of [32,28,28,64] took 2.2 / 1.5 / 1.6 ms with 16 / 32 / 64 lanes.
COLUMN_LANES = 32
# The right operands of one kernel's matmul tiles together, in a While loop's body (a Keras
# RNN step): every iteration reads them whole, next to the library calls of the same step.
# Measured on the development machine's Xeon (2 MiB of L2 a core): the 256-unit LSTM step of
# a stacked LSTM with a 1 MiB weight in its kernel ran 14.0 ms at batch 8 (6.7 at batch 1)
# where TensorFlow took 12.3 (4.3); with tiles of at most 512 KB, 3.5 ms at batch 1. Outside
# loops (an unrolled RNN, whose input projections are one matmul before the steps) a kernel's
# tiles have no such budget: each stays under `SMALL_MATMUL_BYTES`.
LOOP_TILE_OPERANDS_BYTES = 1 << 19
# The longest row an elementwise kernel's unit may have where an input repeats along it (a
# bias of the channels, broadcast over the pixels): the CPU kernel repeats that input once
# into a row-long buffer on its stack. Rows of a few channels (LeNet-5's 6) are otherwise
# units of a few elements: on this VM 0.50 ms against TensorFlow's 0.35 for its first
# convolution's bias and tanh at batch 32.
PERIODIC_ROW_ELEMENTS = 4096


@dataclass(frozen=True)
class Target:
    cores: int

    @staticmethod
    def this_machine() -> Target:
        return Target(max(1, os.cpu_count() or 1))


def output_cycles(shapes: Iterable[Dims | None]) -> int:
    """A rough count of a group's work from its ops' output shapes: one cycle an element
    (unknown sizes guessed, an unknown rank taken as more than `PARALLEL_MIN_CYCLES`)."""
    total = 0
    for shape in shapes:
        if shape is None:
            return PARALLEL_MIN_CYCLES + 1
        total += math.prod(ROW_GUESS if d is None else d for d in shape)
    return round(total * CYCLES_PER_ELEMENT)


def shares_a_core(cycles: Sequence[int]) -> bool:
    """Whether independent kernels of these amounts of work are worth one launch on a CPU,
    where TensorFlow's executor would otherwise run them side by side: together they are less
    work than waking a second core (`PARALLEL_MIN_CYCLES`), so the dispatch saved counts."""
    return sum(cycles) <= PARALLEL_MIN_CYCLES


def unit_cycles(row_elements: int, op_cost: int, macs: int = 0, rows: int = 1) -> int:
    """Estimated cycles of one unit of work (what TensorFlow's ParallelFor weighs against the
    cost of waking threads, so that small kernels run on the calling thread)."""
    per_row = row_elements * (op_cost * CYCLES_PER_COST + CYCLES_PER_ELEMENT)
    return max(1, round((per_row + macs / MATMUL_MACS_PER_CYCLE) * rows))


@dataclass(frozen=True)
class SplitCost:
    split: int
    units: int
    row_elements: int
    cycles: float  # of the whole domain, with `cores` units at a time


def split_cost(domain: Dims, split: int, op_cost: int, target: Target) -> SplitCost:
    """The estimated time of an elementwise group cut at `split` (outer axes: units)."""
    units = math.prod(ROW_GUESS if d is None else d for d in domain[:split])
    row = math.prod(ROW_GUESS if d is None else d for d in domain[split:])
    fill = min(1.0, row / VECTOR_ELEMENTS)
    per_element = (op_cost * CYCLES_PER_COST + CYCLES_PER_ELEMENT) / fill
    unit = UNIT_OVERHEAD_CYCLES + row * per_element
    cores = target.cores if units * unit >= PARALLEL_MIN_CYCLES else 1
    return SplitCost(split, units, row, math.ceil(units / cores) * unit)


def choose_loop_split(
    domain: Dims,
    valid: list[int],
    op_cost: int,
    target: Target | None = None,
) -> int:
    """The fastest of the `valid` splits (ties: the most units, then the larger split)."""
    target = target or Target.this_machine()
    if not valid:
        return len(domain)
    costs = [split_cost(domain, s, op_cost, target) for s in valid]
    best = min(costs, key=lambda c: (c.cycles, -c.units, -c.split))
    return best.split


# Query rows of an attention kernel's unit of work on the CPU: the block's scores are one
# matmul against the keys (K transposed once per batch point and reused by its blocks).
ATTENTION_ROWS = 32


def attention_block_rows(queries: int | None) -> int:
    """Rows of an attention unit: `ATTENTION_ROWS`, or all the queries if there are fewer."""
    return ATTENTION_ROWS if queries is None else max(1, min(ATTENTION_ROWS, queries))
