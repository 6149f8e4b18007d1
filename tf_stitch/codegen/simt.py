"""A CUDA kernel as a CPU kernel library, through the SIMT emulation (`simt_emu.h`).

`emulated_source(kernel)` is the exact source `emit_cuda` gives nvcc, preceded by the
emulation header and followed by the CPU kernel ABI (`ts_abi_version`, `ts_run`), whose
`ts_run` launches the kernel on the emulated grid for the units it is given. The StitchedKernel
op then runs it like any CPU kernel, so every test graph can check the CUDA kernels against
TensorFlow on a machine without a GPU (`TF_STITCH_KERNELS=simt`).
"""

from __future__ import annotations

from tf_stitch.codegen.c_tables import (
    ABI_VERSION,
    CTYPE,
    header,
    product,
)
from tf_stitch.codegen.cuda import emit_cuda
from tf_stitch.codegen.cuda_head import gathers
from tf_stitch.codegen.kernel_ir import Kernel

# The emulated grid: a few blocks of two warps, so that grid-stride loops and reductions across
# warps run as they do on a GPU.
EMULATED_BLOCKS = 3
EMULATED_THREADS = 64


def emulated_source(kernel: Kernel) -> str:
    return "\n".join([header("simt_emu.h"), emit_cuda(kernel), _abi(kernel)])


def _abi(kernel: Kernel) -> str:
    k = kernel
    lines = [
        f'extern "C" int ts_abi_version(void) {{ return {ABI_VERSION}; }}',
        "",
        'extern "C" void ts_run(const void* const* ts_in, void* const* ts_out, '
        "const int64_t* ts_sym, int64_t ts_begin, int64_t ts_end) {",
    ]
    lines += [f"  const int64_t {name} = ts_sym[{s}];" for s, (name, _, _) in enumerate(k.symbols)]
    # the op counts blocks of `block_rows` units
    lines += [
        f"  const int64_t ts_rows = {product(k.outer)};",
        f"  const int64_t ts_first = ts_begin * {k.block_rows};",
        f"  const int64_t ts_last = ts_end * {k.block_rows} < ts_rows ? ts_end * {k.block_rows} "
        ": ts_rows;",
        "  (void)ts_sym;",
    ]
    args = [f"static_cast<const {CTYPE[p.dtype]}*>(ts_in[{p.index}])" for p in k.inputs]
    args += [f"static_cast<{CTYPE[p.dtype]}*>(ts_out[{p.index}])" for p in k.outputs]
    if gathers(k):  # the op's error cell follows its outputs
        args.append(f"static_cast<unsigned long long*>(ts_out[{len(k.outputs)}])")
    args += [name for name, _, _ in k.symbols] + ["ts_first", "ts_last"]
    lines += [
        f"  ts_emu::launch({EMULATED_BLOCKS}, {EMULATED_THREADS}, [&] {{",
        f"    {k.name}({', '.join(args)});",
        "  });",
        "}",
    ]
    return "\n".join(lines) + "\n"
