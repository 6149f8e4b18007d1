"""Kernel IR -> C++ for the CPU: `emit_cpu` chooses the emitter a kernel needs (rows, columns,
or attention) and returns its complete source. The emitters and their tables are in `cstyle`
(rows, the base of the others), `cpu_columns` and `attention_cpu`; the tables are named here
too, as the CPU emitter's."""

from __future__ import annotations

from tf_stitch.codegen.attention_cpu import emit_attention_cpu
from tf_stitch.codegen.c_tables import (
    ABI_VERSION,
    CTYPE,
    EXPR,
    INT_EXPR,
    MIN_PERIOD,
    REDUCE_INIT,
    REDUCE_STEP,
    literal,
)
from tf_stitch.codegen.cpu_columns import ColumnEmitter
from tf_stitch.codegen.cstyle import Emitter
from tf_stitch.codegen.kernel_ir import Kernel

__all__ = [
    "ABI_VERSION",
    "CTYPE",
    "EXPR",
    "INT_EXPR",
    "MIN_PERIOD",
    "REDUCE_INIT",
    "REDUCE_STEP",
    "emit_cpu",
    "literal",
]


def emit_cpu(kernel: Kernel) -> str:
    """The complete, self-contained C++ source of one kernel library."""
    if kernel.attention is not None:
        return emit_attention_cpu(kernel)
    if kernel.lanes:
        return ColumnEmitter(kernel).source()
    return Emitter(kernel).source()
