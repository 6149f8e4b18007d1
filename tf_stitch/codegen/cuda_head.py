"""What every CUDA kernel's source starts with: the preludes (math, reductions, gathers, 16-bit
floats, float64 and integer functions), the `__global__` function's signature and its arguments,
and the launch shape (`BLOCK_THREADS`). The row, column and elementwise emitter (`cuda`) and the
attention emitter (`attention_cuda`) both build on it.
"""

from __future__ import annotations

from tf_stitch.codegen.c_tables import (
    CTYPE,
    OPS_PRELUDE,
    has_double,
    has_half,
    has_int,
    header,
)
from tf_stitch.codegen.kernel_ir import Buffer, Kernel

# Threads per block when launched on a GPU (a kernel may run with any multiple of 32).
BLOCK_THREADS = 256

_CUDA_PRELUDE = """
template <int KIND, typename T>
__device__ __forceinline__ T ts_combine(T a, T b) {
  if constexpr (std::is_integral<T>::value) {  // wrapping (cpu_int.h)
    return KIND == 0 ? ts_iadd(a, b) : KIND == 1 ? ts_imul(a, b) : KIND == 2 ? ts_imax(a, b)
                                                                            : ts_imin(a, b);
  } else {
    return KIND == 0 ? a + b : KIND == 1 ? a * b : KIND == 2 ? ts_max(a, b) : ts_min(a, b);
  }
}

// Every thread's partial, combined across the block; every thread returns the result.
// `scratch` holds one value per warp.
template <int KIND, typename T>
__device__ __forceinline__ T ts_block_reduce(T v, T identity, T* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = ts_combine<KIND>(v, __shfl_xor_sync(0xffffffffu, v, o));
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < ((blockDim.x + 31u) >> 5) ? scratch[lane] : identity;
  for (int o = 16; o > 0; o >>= 1) v = ts_combine<KIND>(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // the next reduction reuses the scratch
  return v;
}
"""


_GATHER_PRELUDE = """
__device__ __forceinline__ void ts_gather_error(unsigned long long* cell, int64_t index,
                                                int64_t rows) {
  if (atomicCAS(cell, 0ull, 1ull) == 0ull) {
    cell[1] = static_cast<unsigned long long>(index);
    cell[2] = static_cast<unsigned long long>(rows);
  }
}
"""


class CudaUnsupported(Exception):
    """The kernel uses something the CUDA emitter does not emit yet (it runs on the CPU)."""


def kernel_arguments(kernel: Kernel) -> list[str]:
    """The kernel's parameters in order: inputs, outputs, run-time sizes, the unit range."""
    args = [f"const {CTYPE[p.dtype]}* __restrict__ {p.name}" for p in kernel.inputs]
    args += [f"{CTYPE[p.dtype]}* __restrict__ {p.name}" for p in kernel.outputs]
    if gathers(kernel):
        args.append("unsigned long long* __restrict__ ts_error")
    args += [f"const int64_t {name}" for name, _, _ in kernel.symbols]
    return [*args, "const int64_t ts_first", "const int64_t ts_units"]


def kernel_head(kernel: Kernel) -> list[str]:
    """Headers, the math and reduction preludes, and the `__global__` function's signature up to
    its opening brace."""
    head = cuda_preamble(gathers(kernel), has_half(kernel), has_double(kernel), has_int(kernel))
    return [*head, *signature(kernel_arguments(kernel), kernel.name)]


# 16-bit floats (cpu_half.h) as host and device code: stored in 16 bits, computed in float.
_HALF_PRELUDE = [
    "#define TS_HALF_FN static __host__ __device__ __forceinline__",
    "#define TS_HALF_METHOD __host__ __device__",
    header("cpu_half.h"),
]


# float64's functions (cpu_double.h) as host and device code.
_DOUBLE_PRELUDE = [
    "#define TS_DOUBLE_FN static __host__ __device__ __forceinline__",
    header("cpu_double.h"),
]


# Integer arithmetic (cpu_int.h) as host and device code.
_INT_PRELUDE = [
    "#define TS_INT_FN static __host__ __device__ __forceinline__",
    header("cpu_int.h"),
]


def cuda_preamble(
    gather: bool = False, half: bool = False, double: bool = False, integer: bool = False
) -> list[str]:
    """Headers and the math and reduction preludes (and the gathers' error report, the
    16-bit float types, float64's and the integers' functions)."""
    return [
        "#include <cmath>",
        "#include <cstdint>",
        "#include <cstring>",
        "#include <type_traits>",
        "",
        "#define TS_MATH_INLINE static __device__ __forceinline__",
        header("cpu_math_coeffs.h"),
        header("cpu_math.h"),
        OPS_PRELUDE.replace("static inline", "static __device__ __forceinline__"),
        *(_DOUBLE_PRELUDE if double else []),  # before the reductions' templates use them
        *(_INT_PRELUDE if integer else []),
        _CUDA_PRELUDE,
        *([_GATHER_PRELUDE] if gather else []),
        *(_HALF_PRELUDE if half else []),
    ]


def signature(args: list[str], name: str, device: bool = False) -> list[str]:
    """A `__global__` function's signature up to its opening brace (a `__device__` one's, for
    a bundle's member)."""
    kind = (
        "static __device__ __forceinline__ void"
        if device
        else f'extern "C" __global__ void __launch_bounds__({BLOCK_THREADS})'
    )
    return [f"{kind} {name}(", *(f"    {a}," for a in args[:-1]), f"    {args[-1]}) {{"]


def row_buffer(kernel: Kernel, buffer: Buffer) -> int:
    """Elements of a row buffer for one block: one row (the CPU's column kernels hold a row per
    lane; a CUDA block runs one unit)."""
    return buffer.elements // kernel.lanes if kernel.lanes else buffer.elements


def gathers(kernel: Kernel) -> bool:
    """Does the kernel read rows of a table by index (and so take an error cell)?"""
    return any(p.gather for p in kernel.inputs)


def flat_elements(kernel: Kernel) -> bool:
    """Elementwise kernels run one thread per element rather than a block per row."""
    return (
        kernel.attention is None
        and not kernel.reductions
        and not kernel.buffers
        and not kernel.tiles
        and not any(kernel.row_stmts[1:])
    )
