"""outline: each planned group becomes one StitchedKernel node running its generated kernel.

Kernels are lowered, emitted as C++ and compiled (in parallel) first; a group whose kernel
cannot be generated or compiled stays as its original TensorFlow ops, with a warning that says
why. Fetched tensors keep their node names through an Identity reading the kernel's output.
With `Options.cuda`, every kernel the CUDA emitter handles is also compiled by nvcc; its node
then carries the fatbin's key and `_kernel: "cuda"`, which selects the op's GPU kernel on a GPU.
With `Options.fallback`, every node also carries its group's ops as a function (fallback.py).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import tensorflow as tf

from tf_stitch.codegen.bundle import (
    bundle,
    bundleable,
    content_named_cuda_bundle,
    emit_cpu_bundle,
    emulated_bundle_source,
)
from tf_stitch.codegen.compilers import Compilers, KernelCompileError, NvccMissing
from tf_stitch.codegen.cpu import emit_cpu
from tf_stitch.codegen.cuda import content_named_cuda
from tf_stitch.codegen.cuda_head import CudaUnsupported, flat_elements
from tf_stitch.codegen.kernel_ir import Kernel
from tf_stitch.codegen.lower import LoweringError, lower
from tf_stitch.codegen.op_attrs import cuda_attrs, stitched_kernel_attrs
from tf_stitch.codegen.simt import emulated_source
from tf_stitch.fusion.bundles import plan_bundles
from tf_stitch.fusion.decision import Record, RecordKind, allow, forbid
from tf_stitch.fusion.planner import Group
from tf_stitch.graph.ir import AttrList, DType, FuncRef, Graph, Node, TensorInfo, TensorRef
from tf_stitch.passes.base import KernelInfo, PassContext, graph_pass
from tf_stitch.passes.fallback import add_functions, fallback_function

OP_NAME = "StitchedKernel"


@dataclass
class _Built:
    group: Group
    node_name: str
    kernel: Kernel
    source: str
    attrs: dict[str, Any]
    key: str = ""
    error: str = ""
    cuda_source: str = ""
    cuda_function: str = ""  # its `__global__` function's name
    cuda_unsupported: str = ""  # why the kernel has no CUDA source
    cuda_attrs: dict[str, Any] = field(default_factory=dict)  # of its CUDA build, if built


@graph_pass("outline")
def outline(graph: Graph, ctx: PassContext) -> Graph:
    """Replaces every planned group by one StitchedKernel node."""
    if ctx.plan is None or not (ctx.plan.groups or ctx.plan.singles):
        return graph
    out = graph.copy()
    built = [b for g in ctx.plan.groups if (b := _generate(out, g, ctx)) is not None]
    singles = [b for g in ctx.plan.singles if (b := _generate(out, g, ctx, quiet=True))]
    built = _bundled(out, built, singles, ctx)
    _compile_all(built, ctx.options.compile, _compilers(ctx))
    if ctx.options.cuda and ctx.options.compile:
        _build_cuda(built, ctx)
    renamed: dict[TensorRef, TensorRef] = {}  # outputs of groups already replaced
    functions = []
    for b in built:
        if not b.error and ctx.options.fallback:
            try:
                inputs = [renamed.get(r, r) for r in _input_refs(b)]
                function = fallback_function(out, inputs, b.group.outputs, b.node_name)
                b.attrs["fallback"] = AttrList("func", (FuncRef(function.signature.name, {}),))
                functions.append(function)
            except (ValueError, TypeError, tf.errors.OpError) as e:
                b.error = f"its fallback function cannot be built: {e}"
        if b.error:
            message = f"tf_stitch: group {b.node_name} stays as TensorFlow ops: {b.error}"
            ctx.refuse(RecordKind.COMPILE, f"kernel {b.node_name}", b.error, message)
            continue
        _replace(out, b, renamed)
        ctx.kernels.append(_info(b))
        if b.cuda_unsupported:
            reason = f"no CUDA build, the CPU's only: {b.cuda_unsupported}"
            ctx.records.append(Record(f"kernel {b.node_name}", forbid(reason), RecordKind.CUDA))
    if functions:
        out.library = add_functions(out.library, functions)
    return out


def _input_refs(b: _Built) -> list[TensorRef]:
    return [TensorRef.parse(p.tensor) for p in b.kernel.inputs]


def _generate(graph: Graph, group: Group, ctx: PassContext, quiet: bool = False) -> _Built | None:
    """`group`'s kernel, lowered and emitted (not compiled); None, with a warning unless
    `quiet`, if it cannot be generated."""
    node_name = graph.unique_name(f"{common_scope(group.names)}stitched_{group.id}")
    try:
        kernel = lower(graph, group, _sanitize(node_name))
        source = emit_cpu(kernel) if ctx.options.kernel_source == "cpu" else emulated_source(kernel)
        # Encoded now, so that a group the op cannot describe never reaches the graph.
        attrs = stitched_kernel_attrs(kernel, source, "")
        b = _Built(group, node_name, kernel, source, attrs)
        try:
            b.cuda_source, b.cuda_function = content_named_cuda(kernel)
        except CudaUnsupported as e:
            b.cuda_unsupported = str(e)
        return b
    except (LoweringError, ValueError, CudaUnsupported) as e:
        if not quiet:
            message = f"tf_stitch: group {node_name} stays as TensorFlow ops: {e}"
            ctx.refuse(RecordKind.CODEGEN, f"group {group.id} ({node_name})", str(e), message)
        return None


def _bundled(
    graph: Graph, built: list[_Built], singles: list[_Built], ctx: PassContext
) -> list[_Built]:
    """`built` with the independent elementwise kernels that fusion/bundles.py puts together
    made one bundle kernel each (codegen/bundle.py); `singles` (kernels of one op) are
    candidates too, but those left out of every bundle stay TensorFlow ops."""
    everything = built + singles
    eligible = [b for b in everything if b.group.attention is None and bundleable(b.kernel)]
    chosen = plan_bundles(graph, [b.group for b in eligible], ctx.options.gpu, ctx.log)
    if not chosen:
        return built
    taken: set[int] = set()
    bundles = []
    for indices in chosen:
        parts = [eligible[i] for i in indices]
        taken.update(id(p) for p in parts)
        names = [n for p in parts for n in p.group.names]
        node_name = graph.unique_name(f"{common_scope(names)}bundle_{parts[0].group.id}")
        made = bundle(_sanitize(node_name), [p.kernel for p in parts])
        cpu = ctx.options.kernel_source == "cpu"
        source = emit_cpu_bundle(made) if cpu else emulated_bundle_source(made)
        group = dataclasses.replace(
            parts[0].group,
            nodes=[n for p in parts for n in p.group.nodes],
            inputs=list(dict.fromkeys(r for p in parts for r in p.group.inputs)),
            outputs=[r for p in parts for r in p.group.outputs],
        )
        b = _Built(
            group, node_name, made.kernel, source, stitched_kernel_attrs(made.kernel, source, "")
        )
        b.cuda_source, b.cuda_function = content_named_cuda_bundle(made)
        bundles.append(b)
        ctx.records.append(
            Record(
                f"bundle {node_name}",
                allow(
                    f"{len(parts)} independent elementwise kernels launched as one: "
                    + ", ".join(p.node_name for p in parts)
                ),
            )
        )
    return [b for b in built if id(b) not in taken] + bundles


def _compilers(ctx: PassContext) -> Compilers:
    if ctx.compilers is None:
        raise ValueError(
            "the outline pass builds kernels with ctx.compilers, and none were given "
            "(optimize() passes tf_stitch.runtime.compilers.COMPILERS)"
        )
    return ctx.compilers


def _compile_all(built: list[_Built], compile_now: bool, compilers: Compilers) -> None:
    """Compiles every distinct C++ source once, all of them at once (a model's repeated layers
    share their kernels' sources)."""

    def work(source: str) -> str | KernelCompileError:
        try:
            return compilers.cpu(source) if compile_now else compilers.key(source)
        except KernelCompileError as e:
            return e

    keys = _once_each((b.source for b in built), work)
    for b in built:
        key = keys[b.source]
        if isinstance(key, KernelCompileError):
            b.error = f"its kernel cannot be built: {key}"
        else:
            b.key = key


_T = TypeVar("_T")


def _once_each(sources: Iterable[str], work: Callable[[str], _T]) -> dict[str, _T]:
    """`work` of every distinct source, once each, all of them at once across the cores."""
    distinct = sorted(set(sources))
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        return dict(zip(distinct, pool.map(work, distinct), strict=True))


def _replace(graph: Graph, b: _Built, renamed: dict[TensorRef, TensorRef]) -> None:
    group, kernel = b.group, b.kernel
    outputs = [
        TensorInfo(p.dtype, graph.info(TensorRef.parse(p.tensor)).shape) for p in kernel.outputs
    ]
    node = Node(
        b.node_name,
        OP_NAME,
        [renamed.get(r, r) for r in _input_refs(b)],
        {**b.attrs, "cache_key": b.key.encode(), **b.cuda_attrs},
        outputs,
        device=group.nodes[0].device,
    )
    graph.add(node)
    fetched = graph.fetched()
    for i, ref in enumerate(group.outputs):
        graph.replace_uses(ref, node.output(i))
        renamed[ref] = node.output(i)
    graph.remove(group.names)
    for i, ref in enumerate(group.outputs):
        if ref in fetched:
            # Keep the fetched name: an Identity named like the replaced node reads the kernel.
            identity = Node(
                ref.node,
                "Identity",
                [node.output(i)],
                {"T": DType(outputs[i].dtype)},
                [outputs[i]],
                device=node.device,
            )
            graph.add(identity)
            graph.outputs = [ref if r == node.output(i) else r for r in graph.outputs]


def _build_cuda(built: list[_Built], ctx: PassContext) -> None:
    """Compiles every distinct CUDA source into a fatbin (nvcc), once, all of them at once."""
    compilers = _compilers(ctx)

    def work(source: str) -> str | KernelCompileError:
        try:
            return compilers.cuda(source)
        except KernelCompileError as e:  # NvccMissing among them
            return e

    fatbins = _once_each((b.cuda_source for b in built if not b.error and b.cuda_source), work)
    problems = set()
    for b in built:
        fatbin = fatbins.get(b.cuda_source) if not b.error else None
        if fatbin is None:
            continue
        if isinstance(fatbin, NvccMissing):
            problems.add(str(fatbin))
        elif isinstance(fatbin, KernelCompileError):
            b.cuda_unsupported = f"nvcc failed: {fatbin}"
        else:
            launch = "elements" if flat_elements(b.kernel) else "blocks"
            b.cuda_attrs = cuda_attrs(b.kernel, fatbin, launch, b.cuda_function)
    for message in sorted(problems):  # nvcc missing: said once, the kernels stay CPU-only
        ctx.refuse(RecordKind.CUDA, "nvcc", message, f"tf_stitch: {message}")


def _info(b: _Built) -> KernelInfo:
    cuda_source, unsupported = b.cuda_source, b.cuda_unsupported
    return KernelInfo(
        node=b.node_name,
        name=b.kernel.name,
        members=b.kernel.members,
        schedule=b.kernel.schedule,
        memory="; ".join(filter(None, (str(b.group.memory), b.kernel.buffer_reuse))),
        inputs=[p.tensor for p in b.kernel.inputs],
        outputs=[p.tensor for p in b.kernel.outputs],
        source=b.source,
        cache_key=b.key,
        cuda_source=cuda_source,
        cuda_unsupported=unsupported,
    )


def common_scope(names: Sequence[str]) -> str:
    """The name scope ("a/b/") every name is under, "" if none."""
    parts = [n.split("/")[:-1] for n in names]
    common: list[str] = []
    for level in zip(*parts, strict=False):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return "/".join(common) + "/" if common else ""


def _sanitize(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)
