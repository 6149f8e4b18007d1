"""Kernel IR -> C-style code: `Emitter` renders a kernel's rows as C++ for the CPU, and the
column (`cpu_columns`) and CUDA (`cuda`) emitters subclass it; the tables it writes with (C
types, op -> expression, reductions, literals) are `c_tables`'. `cpu.emit_cpu` chooses the
emitter for a kernel.

A CPU kernel is a shared library exporting the StitchedKernel ABI (`ts_abi_version`, `ts_run`).
`ts_run` processes rows [begin, end) (blocks of `block_rows` rows in kernels with matmul tiles):
the op hands ranges of them to TensorFlow's intra-op thread pool. Within a row, each stage is a
loop over the row's elements; loops that reduce keep `LANES` partial results so that the
compiler vectorizes them without -ffast-math (which would change NaN semantics). A block of a
kernel with matmul tiles first computes its rows of every tile (`cpu_matmul.h`), then runs its
rows.
"""

from __future__ import annotations

import math

from tf_stitch.codegen.c_tables import (
    ABI_VERSION,
    COMPUTE_CTYPE,
    CTYPE,
    LANES,
    MIN_PERIOD,
    NARROW_COLUMNS,
    OPS_PRELUDE,
    ROUND_TO,
    RUN_PARAMETERS,
    STACK_BUFFER_BYTES,
    call_code,
    has_double,
    has_half,
    has_int,
    header,
    itemsize,
    literal,
    product,
    reduce_init,
    reduce_step,
    source_header,
    value_loads,
)
from tf_stitch.codegen.kernel_ir import (
    Accumulate,
    BufferLoad,
    BufferStore,
    Call,
    Expr,
    Kernel,
    Let,
    Lit,
    Load,
    Param,
    Pattern,
    ReduceKind,
    ReduceResult,
    Size,
    Stmt,
    Store,
    Tile,
    Var,
)
from tf_stitch.codegen.sizes import static

_GATHER_PRELUDE = """
static inline void ts_gather_error(void* cell, int64_t index, int64_t rows) {
  int64_t* c = static_cast<int64_t*>(cell);
  int64_t unset = 0;
  if (__atomic_compare_exchange_n(&c[0], &unset, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
    c[1] = index;  // read by the op after every shard has returned
    c[2] = rows;
  }
}
"""


class Emitter:
    def __init__(self, kernel: Kernel, function: str = "") -> None:
        """`function`: emit only the kernel's run function, `static` and so named, without the
        headers and the ABI (a bundle's member, codegen/bundle.py)."""
        self.k = kernel
        self.function = function
        self.params = {p.name: p for p in kernel.inputs + kernel.outputs + kernel.tile_params}
        self.reductions = {r.name: r for r in kernel.reductions}
        self.lines: list[str] = []
        # inputs read through a row-long buffer of their periodic pattern (see _periodic)
        self.periodic: set[str] = set()
        # inputs whose pattern repeats every `period` elements of a row, read by an inner loop
        # over one period (see _nested_period); `nest` holds them while that loop is emitted
        self.period, self.nested = self._nested_period()
        self.nest: frozenset[str] = frozenset()

    def source(self) -> str:
        k = self.k
        self.lines = self._head()
        self._prologue()
        self._periodic()
        if k.tiles:
            # ts_begin/ts_end count blocks of rows
            step = k.block_rows
            self._emit(f"const int64_t ts_rows = {product(k.outer)};", 1)
            last = f"ts_end * {step}"
            self._emit(f"const int64_t ts_last = {last} < ts_rows ? {last} : ts_rows;", 1)
            self._emit(
                f"for (int64_t ts_b0 = ts_begin * {step}; ts_b0 < ts_last; ts_b0 += {step}) {{", 1
            )
            self._block_tiles()
            self._emit("for (int64_t r = ts_b0; r < ts_b1; ++r) {", 1)
        else:
            self._emit("for (int64_t r = ts_begin; r < ts_end; ++r) {", 1)
        self._row_offsets()
        for loop, stmts in enumerate(k.loops):
            self._stmts(k.row_stmts[loop], 2, row=True)
            self._loop(loop, stmts)
        self._stmts(k.row_stmts[len(k.loops)], 2, row=True)
        self._emit("}", 1)
        if k.tiles:
            self._emit("}", 1)
        self._emit("}")
        return "\n".join(self.lines) + "\n"

    def _head(self) -> list[str]:
        """Comments, headers, preludes and the opening of `ts_run` (of the named function
        alone for a bundle's member)."""
        if self.function:
            return [f"static void {self.function}({RUN_PARAMETERS}) {{"]
        return [*self.preamble(), f'extern "C" void ts_run({RUN_PARAMETERS}) {{']

    def preamble(self) -> list[str]:
        """Comments, headers, preludes and the ABI version: all of the source before `ts_run`."""
        k = self.k
        return [
            *source_header(k),
            "#include <cmath>",
            "#include <cstdint>",
            "#include <memory>",
            "",
            header("cpu_math_coeffs.h"),
            header("cpu_math.h"),
            *([header("cpu_matmul.h")] if k.tiles else []),
            *([_GATHER_PRELUDE] if any(p.gather for p in k.inputs) else []),
            *([header("cpu_half.h")] if has_half(k) else []),
            *([header("cpu_double.h")] if has_double(k) else []),
            *([header("cpu_int.h")] if has_int(k) else []),
            OPS_PRELUDE,
            f'extern "C" int ts_abi_version(void) {{ return {ABI_VERSION}; }}',
            "",
        ]

    def _block_tiles(self) -> None:
        """A block's rows [ts_b0, ts_b1) of every tile, then the pointers that read them. A
        16-bit left operand's rows are widened into a float buffer first (the right operand
        was, once per call); a tile written to a 16-bit output is computed into its buffer
        and stored rounded."""
        k = self.k
        self._emit(
            f"const int64_t ts_b1 = ts_b0 + {k.block_rows} < ts_last ? ts_b0 + {k.block_rows} "
            ": ts_last;",
            1,
        )
        for t in k.tiles:
            half_out = bool(t.out) and self.params[t.out].dtype in ROUND_TO
            dest = f"{t.out} + ts_b0 * {t.n}" if t.out and not half_out else f"{t.name}_buf"
            self._emit(f"float* {t.name} = {dest};", 1)
            k0 = 0
            for i, seg in enumerate(t.segments):
                a = f"{seg.param} + ts_b0 * {seg.row_stride}" + (
                    f" + {seg.offset}" if seg.offset else ""
                )
                lda = seg.row_stride
                if self.params[seg.param].dtype in ROUND_TO:  # widened, row by row
                    wide = f"{t.name}_a{i}"
                    self._emit(f"for (int64_t q = 0; q < (ts_b1 - ts_b0) * {seg.width}; ++q) {{", 1)
                    row, col = f"q / {seg.width}", f"q % {seg.width}"
                    self._emit(f"{wide}[q] = ({a})[({row}) * {lda} + {col}];", 2)
                    self._emit("}", 1)
                    a, lda = wide, seg.width
                add = "true" if i else "false"
                if t.n < NARROW_COLUMNS:
                    b, ldb, fn = f"{t.name}_bt + {k0}", t.k, "ts_matmul_narrow"
                else:
                    b, ldb, fn = f"{self._tile_b(t)} + {k0 * t.n}", t.n, "ts_matmul"
                self._emit(
                    f"{fn}({a}, {lda}, {b}, {ldb}, {t.name}, {t.n}, "
                    f"ts_b1 - ts_b0, {seg.width}, {t.n}, {add});",
                    1,
                )
                k0 += seg.width
            if half_out:
                self._emit(f"for (int64_t q = 0; q < (ts_b1 - ts_b0) * {t.n}; ++q) {{", 1)
                self._emit(f"{t.out}[ts_b0 * {t.n} + q] = {t.name}[q];", 2)
                self._emit("}", 1)
        for p in k.tile_params:
            self._emit(f"const float* __restrict {p.name} = {p.tile};", 1)

    def _tile_b(self, t: Tile) -> str:
        """The tile's right operand as floats (a 16-bit one widened once per call)."""
        return f"{t.name}_bf" if self.params[t.b].dtype in ROUND_TO else t.b

    def _emit(self, text: str, depth: int = 0) -> None:
        self.lines.append("  " * depth + text)

    # -- setup --------------------------------------------------------------------------------
    def _prologue(self) -> None:
        k = self.k
        for s, (axis_name, _, _) in enumerate(k.symbols):
            self._emit(f"const int64_t {axis_name} = ts_sym[{s}];", 1)
        self._emit(f"const int64_t ts_C = {product(k.inner)};", 1)
        for p in k.inputs:
            ct = CTYPE[p.dtype]
            self._emit(
                f"const {ct}* __restrict {p.name} = static_cast<const {ct}*>(ts_in[{p.index}]);", 1
            )
        for p in k.outputs:
            ct = CTYPE[p.dtype]
            self._emit(f"{ct}* __restrict {p.name} = static_cast<{ct}*>(ts_out[{p.index}]);", 1)
        on_stack = sum(b.elements * itemsize(b.dtype) for b in k.buffers)
        for b in k.buffers:
            ct = COMPUTE_CTYPE[b.dtype]
            if on_stack <= STACK_BUFFER_BYTES:
                self._emit(f"{ct} {b.name}[{b.elements}];", 1)
            else:  # large row buffers live on the heap, once per call
                self._emit(f"std::unique_ptr<{ct}[]> {b.name}_owner(new {ct}[{b.elements}]);", 1)
                self._emit(f"{ct}* __restrict {b.name} = {b.name}_owner.get();", 1)
        for t in k.tiles:
            if self._tile_b(t) != t.b:  # a 16-bit right operand, widened once per call
                self._array(f"{t.name}_bf", t.k * t.n)
                self._emit(
                    f"for (int64_t q = 0; q < {t.k * t.n}; ++q) {t.name}_bf[q] = {t.b}[q];", 1
                )
            if t.n < NARROW_COLUMNS:  # the right operand transposed, once per call
                self._array(f"{t.name}_bt", t.k * t.n)
                right = self._tile_b(t)
                self._emit(f"ts_transpose({right}, {t.n}, {t.name}_bt, {t.k}, {t.k}, {t.n});", 1)
            if not t.out or self.params[t.out].dtype in ROUND_TO:
                self._array(f"{t.name}_buf", k.block_rows * t.n)
            for i, seg in enumerate(t.segments):
                if self.params[seg.param].dtype in ROUND_TO:
                    self._array(f"{t.name}_a{i}", k.block_rows * seg.width)
        self._emit("(void)ts_sym;", 1)

    def _array(self, name: str, size: int) -> None:
        if size * 4 <= STACK_BUFFER_BYTES:
            self._emit(f"float {name}[{size}];", 1)
        else:
            self._emit(f"std::unique_ptr<float[]> {name}_owner(new float[{size}]);", 1)
            self._emit(f"float* {name} = {name}_owner.get();", 1)

    def _row_offsets(self) -> None:
        params = self.k.inputs + self.k.outputs + self.k.tile_params
        for p in params:
            a = p.access
            if p.gather:
                continue
            if p.tile and a.outer != Pattern.ZERO:  # a tile holds the block's rows only
                self._emit(f"const int64_t {p.name}_r = (r - ts_b0) * ({a.row_stride});", 2)
            elif a.outer == Pattern.ZERO:
                self._emit(f"const int64_t {p.name}_r = 0;", 2)
            elif a.outer == Pattern.CONTIGUOUS:
                self._emit(f"const int64_t {p.name}_r = r * ({a.row_stride});", 2)
            else:
                self._emit(
                    f"const int64_t {p.name}_r = {self._decompose('r', range(self.k.split), p)};", 2
                )

        for p in params:
            if p.gather:  # after its index's row offset; a bad index skips the row
                rows, stride = p.gather_rows, p.access.row_stride
                index = f"{p.gather}[{p.gather}_r]"
                if p.gather_wrap:  # a negative index counts from the end (Keras' take)
                    index = f"{index} < 0 ? {index} + {rows} : {index}"
                self._emit(f"const int64_t {p.name}_g = {index};", 2)
                self._emit(f"if ({p.name}_g < 0 || {p.name}_g >= {rows}) {{", 2)
                self._emit(f"ts_gather_error({self._error_cell()}, {p.name}_g, {rows});", 3)
                self._emit("continue;", 3)
                self._emit("}", 2)
                self._emit(f"const int64_t {p.name}_r = {p.name}_g * ({stride});", 2)

    def _error_cell(self) -> str:
        """Where a gathered index out of range is reported: the op's error cell."""
        return f"ts_out[{len(self.k.outputs)}]"

    def _decompose(self, index: str, axes: range, p: Param) -> str:
        """Offset of flat index `index` over `axes` (row-major) for param `p`."""
        terms, div = [], "1"
        for axis in reversed(axes):
            size, stride = self.k.domain[axis], p.access.strides[axis]
            if stride != 0 and size != 1:
                terms.append(f"(({index} / ({div})) % ({size})) * ({stride})")
            div = f"{div} * ({size})"
        return " + ".join(terms) or "0"

    # -- loops ---------------------------------------------------------------------------------
    def _loop(self, loop: int, stmts: list[Stmt]) -> None:
        if not stmts:
            return
        reds = [r for r in self.k.reductions if r.loop == loop]
        for r in reds:
            self._emit(f"{COMPUTE_CTYPE[r.dtype]} {r.name}_val;", 2)
        self._emit("{", 2)
        if not reds and self.period:
            self._emit(f"for (int64_t ts_j = 0; ts_j < ts_C; ts_j += {self.period}) {{", 3)
            self._emit("#pragma GCC ivdep", 4)
            self._emit(f"for (int64_t ts_p = 0; ts_p < {self.period}; ++ts_p) {{", 4)
            self._emit("const int64_t i = ts_j + ts_p;", 5)
            self.nest = self.nested
            self._body(stmts, 5, lane=None)
            self.nest = frozenset()
            self._emit("}", 4)
            self._emit("}", 3)
        elif not reds:
            self._emit("#pragma GCC ivdep", 3)
            self._emit("for (int64_t i = 0; i < ts_C; ++i) {", 3)
            self._body(stmts, 4, lane=None)
            self._emit("}", 3)
        else:
            for r in reds:
                self._emit(f"{COMPUTE_CTYPE[r.dtype]} {r.name}_acc[{LANES}];", 3)
                self._emit(
                    f"for (int l = 0; l < {LANES}; ++l) {r.name}_acc[l] = {reduce_init(r)};",
                    3,
                )
            self._emit("int64_t c = 0;", 3)
            self._emit(f"for (; c + {LANES} <= ts_C; c += {LANES}) {{", 3)
            self._emit(f"for (int64_t l = 0; l < {LANES}; ++l) {{", 4)
            self._emit("const int64_t i = c + l;", 5)
            self._body(stmts, 5, lane="l")
            self._emit("}", 4)
            self._emit("}", 3)
            self._emit("for (int64_t l = 0; c + l < ts_C; ++l) {", 3)
            self._emit("const int64_t i = c + l;", 4)
            self._body(stmts, 4, lane="l")
            self._emit("}", 3)
            for r in reds:
                # The lanes' partials combined pairwise (lane l with lane l + h, h halving), as
                # Eigen's horizontal reduction and the GPU's shuffle tree do: a sum whose
                # value is finite does not overflow on the way, as a running sum of the
                # lanes could (a row of +-1e38 values).
                acc = f"{r.name}_acc"
                step = reduce_step(r, f"{acc}[l]", f"{acc}[l + h]")
                self._emit(f"for (int h = {LANES} / 2; h > 0; h >>= 1)", 3)
                self._emit(f"for (int l = 0; l < h; ++l) {acc}[l] = {step};", 4)
                self._emit(f"{r.name}_val = {acc}[0];", 3)
                if r.kind is ReduceKind.MEAN:
                    ct = COMPUTE_CTYPE[r.dtype]
                    self._emit(f"{r.name}_val = {r.name}_val / static_cast<{ct}>(ts_C);", 3)
        self._emit("}", 2)

    def _body(self, stmts: list[Stmt], depth: int, lane: str | None) -> None:
        for p in self._general_inner_params(stmts):
            off = self._decompose("i", range(self.k.split, len(self.k.domain)), p)
            self._emit(f"const int64_t {p.name}_i = {off};", depth)
        self._stmts(stmts, depth, row=False, lane=lane)

    def _general_inner_params(self, stmts: list[Stmt]) -> list[Param]:
        used = {s.param for s in stmts if isinstance(s, Store)}
        used |= {e.param for s in stmts if isinstance(s, Let) for e in value_loads(s.expr)}
        return [
            self.params[n]
            for n in sorted(used)
            if self.params[n].access.inner == Pattern.GENERAL
            and n not in self.periodic
            and n not in self.nest
        ]

    def _nested_period(self) -> tuple[int, frozenset[str]]:
        """The period of the row's broadcast inputs, where it is worth an inner loop.

        An input broadcast over the row's leading axes and laid out contiguously over its
        trailing ones (a batch norm's per-channel scale over rows of several pixels) repeats
        every `period` = product of those trailing axes elements. The inputs of the period
        most of them share, if it is at least `MIN_PERIOD` elements and shorter than the row,
        are read by an inner loop over one period inside an outer loop over the row's periods:
        contiguously (the loop vectorizes), without a row-long copy (`_periodic`) or a division
        per element. Returns (0, {}) where no input has such a period."""
        by_period: dict[int, list[str]] = {}
        for p in self.k.inputs:
            period = self._period_of(p)
            if period >= MIN_PERIOD:
                by_period.setdefault(period, []).append(p.name)
        if not by_period:
            return 0, frozenset()
        period = max(by_period, key=lambda n: (len(by_period[n]), n))
        return period, frozenset(by_period[period])

    def _period_of(self, p: Param) -> int:
        """The period of input `p` along a row (see `_nested_period`), else 0."""
        k = self.k
        if p.access.inner != Pattern.GENERAL or p.gather or p.tile:
            return 0
        axes = range(k.split, len(k.domain))
        live = [a for a in axes if p.access.strides[a] != 0 and k.domain[a] != 1]
        if not live or live[0] == k.split:  # not broadcast over the row's leading axis
            return 0
        expected = 1
        for a in reversed(range(live[0], len(k.domain))):
            size = k.domain[a]
            if not isinstance(size, int):
                return 0
            if size != 1 and p.access.strides[a] != expected:
                return 0
            expected *= size
        return expected

    def _stmts(self, stmts: list[Stmt], depth: int, row: bool, lane: str | None = None) -> None:
        for s in stmts:
            if isinstance(s, Let):
                ct = COMPUTE_CTYPE[s.dtype]
                self._emit(f"const {ct} {s.var} = {self._expr(s.expr, row)};", depth)
            elif isinstance(s, Store):
                self._emit(f"{self._addr(self.params[s.param], row, s.offset)} = {s.var};", depth)
            elif isinstance(s, Accumulate):
                red = self.reductions[s.reduction]
                acc = f"{red.name}_acc[{lane}]"
                self._emit(f"{acc} = {reduce_step(red, acc, s.var)};", depth)
            elif isinstance(s, BufferStore):
                self._emit(f"{s.buffer}[i] = {s.var};", depth)

    def _periodic(self) -> None:
        """Inputs that every row reads alike, but not contiguously (a bias of the last axis
        broadcast over rows of several pixels): repeated once into a row-long buffer, so that
        the row's loop reads them contiguously (and vectorizes) instead of computing each
        element's offset."""
        if not all(isinstance(d, int) for d in self.k.inner):
            return
        row = math.prod(static(d) for d in self.k.inner)
        candidates = [
            p
            for p in self.k.inputs
            if p.access.outer == Pattern.ZERO
            and p.access.inner == Pattern.GENERAL
            and not p.gather
            and p.name not in self.nested
        ]
        budget = STACK_BUFFER_BYTES // 2
        for p in candidates:
            size = row * itemsize(p.dtype)
            if size > budget:
                break
            budget -= size
            self.periodic.add(p.name)
            ct = CTYPE[p.dtype]
            self._emit(f"{ct} {p.name}_rep[{row}];  // the pattern each row reads", 1)
            offset = self._decompose("i", range(self.k.split, len(self.k.domain)), p)
            fill = f"{p.name}_rep[i] = {p.name}[{offset}];"
            self._emit(f"for (int64_t i = 0; i < {row}; ++i) {fill}", 1)

    def _addr(self, p: Param, row: bool, offset: Size = 0) -> str:
        extra = f" + ({offset})" if offset else ""
        if p.name in self.periodic and not row and not offset:
            return f"{p.name}_rep[i]"
        if p.name in self.nest and not row:
            return f"{p.name}[{p.name}_r + ts_p{extra}]"
        if row or p.access.inner == Pattern.ZERO:
            return f"{p.name}[{p.name}_r{extra}]"
        if p.access.inner == Pattern.CONTIGUOUS:
            return f"{p.name}[{p.name}_r + i{extra}]"
        if p.access.inner == Pattern.STRIDED:
            return f"{p.name}[{p.name}_r + i * ({p.access.inner_stride}){extra}]"
        return f"{p.name}[{p.name}_r + {p.name}_i{extra}]"

    def _expr(self, e: Expr, row: bool) -> str:
        if isinstance(e, Var):
            return e.name
        if isinstance(e, Lit):
            return literal(e.value, e.dtype)
        if isinstance(e, Load):
            return self._addr(self.params[e.param], row, e.offset)
        if isinstance(e, ReduceResult):
            return f"{e.reduction}_val"
        if isinstance(e, BufferLoad):
            return f"{e.buffer}[i]"
        if isinstance(e, Call):
            return self._call(e, row)
        raise TypeError(f"unknown expression {e!r}")

    def _call(self, e: Call, row: bool) -> str:
        return call_code(e, [self._expr(a, row) for a in e.args])
