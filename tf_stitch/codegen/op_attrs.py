"""The attributes of a StitchedKernel node, encoded as the op expects them (its ABI)."""

from __future__ import annotations

from typing import Any

from tf_stitch.codegen.kernel_ir import Kernel, Param, Size
from tf_stitch.graph.ir import AttrList, DType


def encode_size(size: int | None, axis: int, kernel: Kernel) -> int:
    """A static size as itself; a size bound at run time as -1 - (its symbol's index)."""
    if size is not None:
        return size
    if axis < 0:
        raise ValueError(f"a dim of unknown size of kernel {kernel.name} is on no axis")
    name = kernel.domain[axis]
    for s, (axis_name, _, _) in enumerate(kernel.symbols):
        if axis_name == str(name):
            return -1 - s
    raise ValueError(f"axis {axis} of kernel {kernel.name} has no symbol")


def encode_param_dims(param: Param, kernel: Kernel) -> list[int]:
    return [encode_size(d, a, kernel) for d, a in zip(param.dims, param.axes, strict=True)]


def _encode_domain(sizes: tuple[Size, ...], first_axis: int, kernel: Kernel) -> list[int]:
    return [
        s if isinstance(s, int) else encode_size(None, first_axis + i, kernel)
        for i, s in enumerate(sizes)
    ]


def stitched_kernel_attrs(kernel: Kernel, source: str, cache_key: str) -> dict[str, Any]:
    in_dims = [d for p in kernel.inputs for d in encode_param_dims(p, kernel)]
    out_dims = [d for p in kernel.outputs for d in encode_param_dims(p, kernel)]
    return {
        "Tin": AttrList("type", tuple(DType(p.dtype) for p in kernel.inputs)),
        "Tout": AttrList("type", tuple(DType(p.dtype) for p in kernel.outputs)),
        "kernel_name": kernel.name.encode(),
        "cache_key": cache_key.encode(),
        "source": source.encode(),
        "input_ranks": AttrList("i", tuple(len(p.dims) for p in kernel.inputs)),
        "input_dims": AttrList("i", tuple(in_dims)),
        "output_ranks": AttrList("i", tuple(len(p.dims) for p in kernel.outputs)),
        "output_dims": AttrList("i", tuple(out_dims)),
        "unit_dims": AttrList("i", tuple(_encode_domain(kernel.outer, 0, kernel))),
        "unit_cost": int(kernel.unit_cost),
        "block_rows": int(kernel.block_rows),
        "schedule": kernel.schedule.encode(),
    }


def cuda_attrs(kernel: Kernel, cuda_key: str, launch: str, function: str) -> dict[str, Any]:
    """The attrs of a kernel's CUDA build: its fatbin's key, the `__global__` function the op
    looks up in it (`kernel_name`, also what the op's errors call it), how it is launched and
    the elements of a unit (for a thread-per-element launch); `_kernel` selects the op's
    kernels registered under the "cuda" label."""
    return {
        "kernel_name": function.encode(),
        "cuda_key": cuda_key.encode(),
        "cuda_launch": launch.encode(),
        "row_dims": AttrList("i", tuple(_encode_domain(kernel.inner, kernel.split, kernel))),
        "cuda_gathers": any(p.gather for p in kernel.inputs),
        "_kernel": b"cuda",
    }
