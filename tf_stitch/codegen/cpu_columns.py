"""Kernel IR -> C++ for column kernels (reductions over outer axes).

A column kernel's unit is one point of the kept axes, and its loops walk the reduced axes,
which are strided in memory. Running units one at a time would read every cache line once per
unit; instead a *chunk* of up to `lanes` consecutive units (steps along the last outer axis,
never crossing its end) runs together: every stage loops over the row elements `i` outside and
the lanes `l` inside, so that the lanes read neighbouring addresses and the compiler
vectorizes across them. Reductions add blocks of PARTIAL_ROWS rows into partial results, then
the partials into the total. Per-row values and reduction results are arrays of one value per lane;
row buffers hold a row per lane (`buf[i * lanes + l]`).

Within a chunk, every param's row offset is affine in the lane: the chunk's first unit's
offset plus `l` times the param's stride along the lane axis.
"""

from __future__ import annotations

from tf_stitch.codegen.c_tables import (
    COMPUTE_CTYPE,
    product,
    reduce_init,
    reduce_step,
)
from tf_stitch.codegen.cstyle import Emitter
from tf_stitch.codegen.kernel_ir import (
    Accumulate,
    BufferLoad,
    BufferStore,
    Expr,
    Kernel,
    Let,
    Param,
    Pattern,
    ReduceKind,
    ReduceResult,
    Size,
    Stmt,
    Store,
    Var,
)

# A reduction sums this many rows into a partial result before adding it to its total: the
# rounding error grows with the block and the number of blocks, not with all the rows.
PARTIAL_ROWS = 256


class ColumnEmitter(Emitter):
    def __init__(self, kernel: Kernel) -> None:
        super().__init__(kernel)
        self.lane_vars = {s.var for stmts in kernel.row_stmts for s in stmts if isinstance(s, Let)}
        self.lane_axis = kernel.lane_axis

    def source(self) -> str:
        k = self.k
        self.lines = self._head()
        self._prologue()
        # ts_begin/ts_end count chunks of `lanes` units (the op's blocks of rows)
        self._emit(f"const int64_t ts_rows = {product(k.outer)};", 1)
        last = f"ts_end * {k.lanes}"
        self._emit(f"const int64_t ts_last = {last} < ts_rows ? {last} : ts_rows;", 1)
        self._emit(f"for (int64_t r0 = ts_begin * {k.lanes}; r0 < ts_last;) {{", 1)
        self._emit(f"int64_t nl = ts_last - r0 < {k.lanes} ? ts_last - r0 : {k.lanes};", 2)
        if self.lane_axis is not None:  # a chunk stays within one run of the lane axis
            size = k.domain[self.lane_axis]
            self._emit(f"const int64_t ts_run_left = ({size}) - r0 % ({size});", 2)
            self._emit("if (nl > ts_run_left) nl = ts_run_left;", 2)
        else:
            self._emit("nl = 1;", 2)
        self._emit("const int64_t r = r0;", 2)
        self._row_offsets()
        for loop, stmts in enumerate(k.loops):
            self._lane_stmts(k.row_stmts[loop])
            self._column_loop(loop, stmts)
        self._lane_stmts(k.row_stmts[len(k.loops)])
        self._emit("r0 += nl;", 2)
        self._emit("}", 1)
        self._emit("}")
        return "\n".join(self.lines) + "\n"

    # -- per-row (per-lane) statements -------------------------------------------------------
    def _lane_stmts(self, stmts: list[Stmt]) -> None:
        if not stmts:
            return
        for s in stmts:
            if isinstance(s, Let):
                self._emit(f"{COMPUTE_CTYPE[s.dtype]} {s.var}[{self.k.lanes}];", 2)
        self._emit("for (int64_t l = 0; l < nl; ++l) {", 2)
        for s in stmts:
            if isinstance(s, Let):
                self._emit(f"{s.var}[l] = {self._expr(s.expr, True)};", 3)
            elif isinstance(s, Store):
                target = self._addr(self.params[s.param], True, s.offset)
                self._emit(f"{target} = {self._var(s.var)};", 3)
            else:
                raise TypeError(f"{s!r} is not a per-row statement")
        self._emit("}", 2)

    # -- stages --------------------------------------------------------------------------------
    def _column_loop(self, loop: int, stmts: list[Stmt]) -> None:
        if not stmts:
            return
        k = self.k
        reds = [r for r in k.reductions if r.loop == loop]
        for r in reds:
            self._emit(f"{COMPUTE_CTYPE[r.dtype]} {r.name}_acc[{k.lanes}];", 2)
            init = reduce_init(r)
            self._emit(f"for (int64_t l = 0; l < nl; ++l) {r.name}_acc[l] = {init};", 2)
        depth = 2
        if reds:  # rows in blocks: each block's partial result joins the total
            self._emit(f"for (int64_t i0 = 0; i0 < ts_C; i0 += {PARTIAL_ROWS}) {{", 2)
            self._emit(
                f"const int64_t i1 = i0 + {PARTIAL_ROWS} < ts_C ? i0 + {PARTIAL_ROWS} : ts_C;", 3
            )
            for r in reds:
                self._emit(f"{COMPUTE_CTYPE[r.dtype]} {r.name}_part[{k.lanes}];", 3)
                init = reduce_init(r)
                self._emit(f"for (int64_t l = 0; l < nl; ++l) {r.name}_part[l] = {init};", 3)
            self._emit("for (int64_t i = i0; i < i1; ++i) {", 3)
            depth = 3
        else:
            self._emit("for (int64_t i = 0; i < ts_C; ++i) {", 2)
        for p in self._general_inner_params(stmts):
            off = self._decompose("i", range(k.split, len(k.domain)), p)
            self._emit(f"const int64_t {p.name}_i = {off};", depth + 1)
        self._emit("#pragma GCC ivdep", depth + 1)
        self._emit("for (int64_t l = 0; l < nl; ++l) {", depth + 1)
        self._stmts(stmts, depth + 2, row=False, lane="l")
        self._emit("}", depth + 1)
        self._emit("}", depth)
        if reds:
            for r in reds:
                acc = f"{r.name}_acc[l]"
                step = reduce_step(r, acc, f"{r.name}_part[l]")
                self._emit(f"for (int64_t l = 0; l < nl; ++l) {acc} = {step};", 3)
            self._emit("}", 2)
        for r in reds:
            ct = COMPUTE_CTYPE[r.dtype]
            self._emit(f"{ct} {r.name}_val[{k.lanes}];", 2)
            value = f"{r.name}_acc[l]"
            if r.kind is ReduceKind.MEAN:
                value = f"{value} / static_cast<{ct}>(ts_C)"
            self._emit(f"for (int64_t l = 0; l < nl; ++l) {r.name}_val[l] = {value};", 2)

    def _stmts(self, stmts: list[Stmt], depth: int, row: bool, lane: str | None = None) -> None:
        for s in stmts:
            if isinstance(s, BufferStore):
                self._emit(f"{s.buffer}[i * {self.k.lanes} + l] = {s.var};", depth)
            elif isinstance(s, Store):
                target = self._addr(self.params[s.param], row, s.offset)
                self._emit(f"{target} = {self._var(s.var)};", depth)
            elif isinstance(s, Accumulate):
                red = self.reductions[s.reduction]
                acc = f"{red.name}_part[l]"
                step = reduce_step(red, acc, self._var(s.var))
                self._emit(f"{acc} = {step};", depth)
            else:
                super()._stmts([s], depth, row, lane)

    # -- addresses and values ------------------------------------------------------------------
    def _addr(self, p: Param, row: bool, offset: Size = 0) -> str:
        index = f"{p.name}_r"
        lane_stride = p.access.strides[self.lane_axis] if self.lane_axis is not None else 0
        if lane_stride != 0:
            index += " + l" if lane_stride == 1 else f" + l * ({lane_stride})"
        if not row:
            if p.access.inner == Pattern.CONTIGUOUS:
                index += " + i"
            elif p.access.inner == Pattern.STRIDED:
                index += f" + i * ({p.access.inner_stride})"
            elif p.access.inner == Pattern.GENERAL:
                index += f" + {p.name}_i"
        if offset:
            index += f" + ({offset})"
        return f"{p.name}[{index}]"

    def _var(self, name: str) -> str:
        return f"{name}[l]" if name in self.lane_vars else name

    def _expr(self, e: Expr, row: bool) -> str:
        if isinstance(e, Var):
            return self._var(e.name)
        if isinstance(e, ReduceResult):
            return f"{e.reduction}_val[l]"
        if isinstance(e, BufferLoad):
            return f"{e.buffer}[i * {self.k.lanes} + l]"
        return super()._expr(e, row)
