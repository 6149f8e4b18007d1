"""The parts of lowering that both lowerers (`lower`'s rows and columns, `lower_attention`'s
attention) use: symbolic size arithmetic, how a kernel indexes a tensor (its strides and access
pattern over the kernel's domain), the attributes an op's scalar expression needs, and the
error a group that cannot be lowered raises.
"""

from __future__ import annotations

import itertools

from tf_stitch.codegen.kernel_ir import Access, Kernel, Pattern
from tf_stitch.codegen.sizes import Size, dim, multiply
from tf_stitch.fusion.layout_types import Placement, SliceSource
from tf_stitch.fusion.planner import Group
from tf_stitch.graph.ir import INT_DTYPES, DType, Node


class LoweringError(Exception):
    """A group the lowerers cannot turn into a kernel (the group is left to TensorFlow)."""


def symbol_binder(kernel: Kernel, axis: int) -> tuple[int, int]:
    """(input, dim) of the first kernel input whose unknown size is that of domain `axis`."""
    for param in kernel.inputs:
        for i, (size, a) in enumerate(zip(param.dims, param.axes, strict=True)):
            if a == axis and size is None:
                return param.index, i
    raise LoweringError(f"no input carries the size of dynamic axis {axis}")


def domain_sizes(group: Group) -> tuple[Size, ...]:
    """The sizes of the group's domain axes: known ones, else `D<axis>` (a kernel argument)."""
    return tuple(d if d is not None else dim(f"D{a}") for a, d in enumerate(group.layout.domain))


def tensor_strides(dims: tuple[int | None, ...], sizes: tuple[Size, ...]) -> list[Size]:
    """Row-major strides of a tensor of `dims` (an unknown dim has the size in `sizes`)."""
    strides: list[Size] = [0] * len(dims)
    running: Size = 1
    for i in reversed(range(len(dims))):
        strides[i] = running
        dim = dims[i]
        running = multiply(running, sizes[i] if dim is None else dim)
    return strides


def access_of(placement: Placement, domain: tuple[Size, ...], split: int) -> Access:
    """The tensor's strides spread onto the domain axes (0 where it broadcasts), and how to
    index them."""
    own = tensor_strides(tuple(placement.dims), tuple(domain[a] for a in placement.axes))
    strides: list[Size] = [0] * len(domain)
    for d, axis in enumerate(placement.axes):
        if placement.dims[d] != 1:
            strides[axis] = own[d]
    return _access(strides, domain, split, set())


def slice_access(source: SliceSource, domain: tuple[Size, ...], split: int) -> Access:
    """The access of a window of `source.tensor`: the source's strides on the axes the window
    spans (0 where the window is one element of a size-1 dim, or cut away)."""
    sizes = tuple(domain[a] if a >= 0 else 1 for a in source.axes)
    own = tensor_strides(source.dims, sizes)
    strides: list[Size] = [0] * len(domain)
    sliced: set[int] = set()
    for d, axis in enumerate(source.axes):
        if axis < 0:
            continue
        if source.window[d] != 1:
            strides[axis] = own[d]
        if source.window[d] != source.dims[d]:
            sliced.add(axis)
    return _access(strides, domain, split, sliced)


def _access(strides: list[Size], domain: tuple[Size, ...], split: int, sliced: set[int]) -> Access:
    outer, inner = range(split), range(split, len(domain))
    varying_outer = [a for a in outer if domain[a] != 1 and strides[a] != 0]
    row_stride: Size = strides[varying_outer[-1]] if varying_outer else 0
    inner_pattern = _pattern(strides, domain, inner, sliced)
    varying_inner = [a for a in inner if domain[a] != 1 and strides[a] != 0]
    inner_stride: Size = strides[varying_inner[-1]] if varying_inner else 0
    if inner_pattern == Pattern.CONTIGUOUS and inner_stride != 1:
        inner_pattern = Pattern.STRIDED
    return Access(
        tuple(strides),
        _pattern(strides, domain, outer, sliced),
        inner_pattern,
        row_stride,
        inner_stride if inner_pattern == Pattern.STRIDED else 1,
    )


def _pattern(
    strides: list[Size], domain: tuple[Size, ...], axes: range, sliced: set[int]
) -> Pattern:
    """`zero`: no axis varies; `contiguous`: all vary, with row-major strides among them (one
    flat index times the stride of the last; only the first may be a cut window of a larger
    axis); else `general`."""
    relevant = [a for a in axes if domain[a] != 1]
    varying = [a for a in relevant if strides[a] != 0]
    if not varying:
        return Pattern.ZERO
    if len(varying) != len(relevant) or sliced & set(relevant[1:]):
        return Pattern.GENERAL
    for a, b in itertools.pairwise(relevant):
        if strides[a] != multiply(strides[b], domain[b]):
            return Pattern.GENERAL
    return Pattern.CONTIGUOUS


def call_attrs(node: Node) -> tuple[tuple[str, float | str | bool], ...]:
    """The attributes an emitter needs to compute `node`'s scalar expression."""
    if node.op == "LeakyRelu":
        return (("alpha", float(node.attrs.get("alpha", 0.2))),)
    if node.op in ("OnesLike", "ZerosLike"):
        return (("dtype", node.outputs[0].dtype),)
    if node.op == "Cast":
        src, dst = node.attrs["SrcT"], node.attrs["DstT"]
        return (("src", src.name), ("dst", dst.name))
    operands = node.attrs.get("T")
    if isinstance(operands, DType) and operands.name in INT_DTYPES:
        return (("T", operands.name),)  # integer ops are TensorFlow's, not C's (cpu_int.h)
    return ()
