"""Kernel IR -> CUDA.

One `__global__` function per kernel, from the same IR as the C++ emitter, with the same scalar
expressions and the same math (`cpu_math.h` compiled as device functions), so GPU and CPU
kernels compute the same values:

- row and column kernels: a block per unit of work (grid-stride over the units); the block's
  threads stride over each stage's loop; a reduction keeps one partial per thread and combines
  them with warp shuffles (`__shfl_xor_sync`) and a shared array of one value per warp, so every
  thread gets the result; row buffers are `__shared__` arrays sized by the memory plan;
  `__syncthreads()` ends every stage;
- elementwise (loop) kernels: one thread per element (grid-stride over all of them).

Sizes known only at run time (the batch) are kernel arguments, as are the first and the end of
the units to run (`ts_first`, `ts_units`). Blocks must have a multiple of 32 threads.

A small matmul's tile is computed per unit: the block's threads each compute columns of the
unit's row of the product into a `__shared__` row (or straight into the output that holds the
product), then the row's stages read it like an input. A gather reads its index per unit; an
index out of range is reported in the error cell the kernel gets after its outputs
(`ts_error`, int64[3] = {1, index, rows}, the first writer wins) and the unit is skipped.
"""

from __future__ import annotations

import dataclasses
import hashlib

from tf_stitch.codegen.attention_cuda import emit_attention_cuda
from tf_stitch.codegen.c_tables import (
    COMPUTE_CTYPE,
    CTYPE,
    itemsize,
    product,
    reduce_init,
    source_header,
)
from tf_stitch.codegen.cstyle import Emitter
from tf_stitch.codegen.cuda_head import (
    BLOCK_THREADS,
    CudaUnsupported,
    flat_elements,
    gathers,
    kernel_arguments,
    kernel_head,
    row_buffer,
    signature,
)
from tf_stitch.codegen.kernel_ir import Kernel, ReduceKind, Stmt, Store

# The head's names the GPU checks and tests use with the emitter's.
__all__ = [
    "BLOCK_THREADS",
    "CudaEmitter",
    "CudaUnsupported",
    "content_named_cuda",
    "emit_cuda",
    "flat_elements",
    "gathers",
]

_COMBINE = {"Sum": 0, "Mean": 0, "Prod": 1, "Max": 2, "Min": 3}


def _scratch(dtype: str) -> str:
    """The block reductions' shared array of one partial per warp, for `dtype`'s reductions."""
    return "ts_scratch" if dtype == "float32" else f"ts_scratch_{dtype}"


# Static shared memory a block may use (the rest of the 48 KB is the scratch and headroom).
MAX_SHARED_BYTES = 40 * 1024


def emit_cuda(kernel: Kernel) -> str:
    """The CUDA source of one kernel: a `__global__` function named after the kernel."""
    if kernel.attention is not None:
        return emit_attention_cuda(kernel)
    shared = sum(row_buffer(kernel, b) * itemsize(b.dtype) for b in kernel.buffers)
    outputs = {p.name: p.dtype for p in kernel.outputs}
    shared += sum(t.n * 4 for t in kernel.tiles if outputs.get(t.out) != "float32")
    if shared > MAX_SHARED_BYTES:
        raise CudaUnsupported(
            f"{kernel.name}: {shared} B of shared memory per block (limit {MAX_SHARED_BYTES})"
        )
    return CudaEmitter(kernel).source()


# The `__global__` function's name while the source is made; then the source's own hash.
_NAME_TOKEN = "__tf_stitch_kernel__"


def content_named_cuda(kernel: Kernel) -> tuple[str, str]:
    """(source, function name) of `kernel`'s CUDA build, its `__global__` function named after
    the source itself (`ts_` and 16 hex digits of its hash): groups that compute the same thing
    (a model's repeated layers) get one source, one nvcc run and one fatbin."""
    try:
        source = emit_cuda(dataclasses.replace(kernel, name=_NAME_TOKEN))
    except CudaUnsupported as e:
        raise CudaUnsupported(str(e).replace(_NAME_TOKEN, kernel.name)) from None
    name = "ts_" + hashlib.sha256(source.encode()).hexdigest()[:16]
    return source.replace(_NAME_TOKEN, name), name


class CudaEmitter(Emitter):
    def source(self) -> str:
        """The kernel's source (with `function`: its `__device__` function alone)."""
        k = self.k
        if self.function:
            self.lines = signature(kernel_arguments(k), self.function, device=True)
        else:
            self.lines = source_header(k, "CUDA") + kernel_head(k)
        self._emit(f"const int64_t ts_C = {product(k.inner)};", 1)
        if flat_elements(k):
            self._flat()
        else:
            self._blocks()
        self._emit("}")
        return "\n".join(self.lines) + "\n"

    # -- elementwise kernels: a thread per element --------------------------------------------
    def _flat(self) -> None:
        self._emit("const int64_t ts_stride = (int64_t)gridDim.x * blockDim.x;", 1)
        self._emit(
            "for (int64_t ts_e = ts_first * ts_C + (int64_t)blockIdx.x * blockDim.x + "
            "threadIdx.x; ts_e < ts_units * ts_C; ts_e += ts_stride) {",
            1,
        )
        self._emit("const int64_t r = ts_e / ts_C;", 2)
        self._emit("const int64_t i = ts_e - r * ts_C;", 2)
        self._row_offsets()
        self._stmts(self.k.row_stmts[0], 2, row=True)
        for stmts in self.k.loops:
            self._body(stmts, 2, lane=None)
        self._emit("}", 1)

    # -- row and column kernels: a block per unit ---------------------------------------------
    def _blocks(self) -> None:
        k = self.k
        for dtype in sorted({r.dtype for r in k.reductions}):
            ct = COMPUTE_CTYPE[dtype]
            self._emit(f"__shared__ {ct} {_scratch(dtype)}[32];", 1)
        for b in k.buffers:
            ct = COMPUTE_CTYPE[b.dtype]
            self._emit(f"__shared__ {ct} {b.name}[{row_buffer(k, b)}];", 1)
        for t in k.tiles:
            if not t.out or self.params[t.out].dtype != "float32":
                self._emit(f"__shared__ float {t.name}_buf[{t.n}];", 1)
        self._emit("for (int64_t r = ts_first + blockIdx.x; r < ts_units; r += gridDim.x) {", 1)
        if k.tiles:
            self._unit_tiles()
        self._row_offsets()
        for loop, stmts in enumerate(k.loops):
            self._stmts(k.row_stmts[loop], 2, row=True)
            self._stage(loop, stmts)
            if loop + 1 < len(k.loops):
                self._emit("__syncthreads();", 2)
        self._stmts(k.row_stmts[len(k.loops)], 2, row=True)
        if k.buffers or k.tiles:
            self._emit("__syncthreads();  // the next unit reuses the shared buffers", 2)
        self._emit("}", 1)

    def _unit_tiles(self) -> None:
        """The unit's row of every tile: thread j computes columns j, j + blockDim.x, ..."""
        k = self.k
        self._emit("const int64_t ts_b0 = r;  // a tile holds this unit's row", 2)
        for t in k.tiles:
            # a 16-bit output holding the product gets it rounded; the tile stays in float
            half_out = bool(t.out) and self.params[t.out].dtype != "float32"
            dest = f"{t.out} + r * {t.n}" if t.out and not half_out else f"{t.name}_buf"
            self._emit(f"float* {t.name} = {dest};", 2)
            self._emit(f"for (int64_t j = threadIdx.x; j < {t.n}; j += blockDim.x) {{", 2)
            self._emit("float acc = 0.0f;", 3)
            k0 = 0
            for s, seg in enumerate(t.segments):
                offset = f" + {seg.offset}" if seg.offset else ""
                ct = CTYPE[self.params[seg.param].dtype]
                self._emit(f"const {ct}* a{s} = {seg.param} + r * {seg.row_stride}{offset};", 3)
                self._emit(f"for (int64_t q = 0; q < {seg.width}; ++q) {{", 3)
                a, b = f"a{s}[q]", f"{t.b}[({k0} + q) * {t.n} + j]"
                if ct != "float":  # 16-bit operands are widened as they are read
                    a = f"float({a})"
                if self.params[t.b].dtype != "float32":
                    b = f"float({b})"
                self._emit(f"acc = fmaf({a}, {b}, acc);", 4)
                self._emit("}", 3)
                k0 += seg.width
            self._emit(f"{t.name}[j] = acc;", 3)
            if half_out:
                self._emit(f"{t.out}[r * {t.n} + j] = acc;", 3)
            self._emit("}", 2)
        self._emit("__syncthreads();  // every thread reads the tiles", 2)
        for p in k.tile_params:
            self._emit(f"const float* __restrict__ {p.name} = {p.tile};", 2)

    def _stage(self, loop: int, stmts: list[Stmt]) -> None:
        reds = [r for r in self.k.reductions if r.loop == loop]
        for r in reds:
            ct = COMPUTE_CTYPE[r.dtype]
            self._emit(f"{ct} {r.name}_acc[1] = {{{reduce_init(r)}}};", 2)
        self._emit("for (int64_t i = threadIdx.x; i < ts_C; i += blockDim.x) {", 2)
        self._body(stmts, 3, lane="0")
        self._emit("}", 2)
        for r in reds:
            ct = COMPUTE_CTYPE[r.dtype]
            init = f"static_cast<{ct}>({reduce_init(r)})"
            if r.dtype == "float32" or r.values:  # (float32's source as it has always been)
                init = reduce_init(r)
            scratch = _scratch(r.dtype)
            combine = _COMBINE[r.kind]
            value = f"ts_block_reduce<{combine}>({r.name}_acc[0], {init}, {scratch})"
            if r.kind is ReduceKind.MEAN:
                value = f"{value} / static_cast<{ct}>(ts_C)"
            self._emit(f"const {ct} {r.name}_val = {value};", 2)

    def _error_cell(self) -> str:
        return "ts_error"

    def _stmts(self, stmts: list[Stmt], depth: int, row: bool, lane: str | None = None) -> None:
        for s in stmts:
            if row and isinstance(s, Store):  # one thread writes a per-row value
                target = self._addr(self.params[s.param], row, s.offset)
                self._emit(f"if (threadIdx.x == 0) {target} = {s.var};", depth)
            else:
                super()._stmts([s], depth, row, lane)
