"""outline: each planned group becomes one StitchedKernel node running its generated kernel.

Kernels are lowered, emitted as C++ and compiled (in parallel) first; a group whose kernel
cannot be generated or compiled stays as its original TensorFlow ops, with a warning that says
why. Fetched tensors keep their node names through an Identity reading the kernel's output.
"""

from __future__ import annotations

import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tf_stitch.codegen.cpu import emit_cpu
from tf_stitch.codegen.cuda import CudaUnsupported, emit_cuda
from tf_stitch.codegen.kernel_ir import Kernel
from tf_stitch.codegen.lower import LoweringError, lower
from tf_stitch.codegen.op_attrs import stitched_kernel_attrs
from tf_stitch.codegen.simt import emulated_source
from tf_stitch.fusion.planner import Group
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.passes.base import KernelInfo, PassContext, graph_pass
from tf_stitch.runtime.kernel_compiler import (
    KernelCompileError,
    check_loadable,
    compile_kernel,
    kernel_key,
)

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


@graph_pass("outline")
def outline(graph: Graph, ctx: PassContext) -> Graph:
    """Replaces every planned group by one StitchedKernel node."""
    if ctx.plan is None or not ctx.plan.groups:
        return graph
    out = graph.copy()
    built = [b for g in ctx.plan.groups if (b := _generate(out, g, ctx)) is not None]
    _compile_all(built, ctx.options.compile)
    renamed: dict[TensorRef, TensorRef] = {}  # outputs of groups already replaced
    for b in built:
        if b.error:
            message = f"tf_stitch: group {b.node_name} stays as TensorFlow ops: {b.error}"
            ctx.warnings.append(message)
            warnings.warn(message, RuntimeWarning, stacklevel=2)
            continue
        _replace(out, b, renamed)
        ctx.kernels.append(_info(b))
    return out


def _generate(graph: Graph, group: Group, ctx: PassContext) -> _Built | None:
    node_name = graph.unique_name(f"{_scope(group.names)}stitched_{group.id}")
    try:
        kernel = lower(graph, group, _sanitize(node_name))
        source = emit_cpu(kernel) if ctx.options.kernel_source == "cpu" else emulated_source(kernel)
        # Encoded now, so that a group the op cannot describe never reaches the graph.
        attrs = stitched_kernel_attrs(kernel, source, "")
        return _Built(group, node_name, kernel, source, attrs)
    except (LoweringError, ValueError, CudaUnsupported) as e:
        message = f"tf_stitch: group {node_name} stays as TensorFlow ops: {e}"
        ctx.warnings.append(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        return None


def _compile_all(built: list[_Built], compile_now: bool) -> None:
    def work(b: _Built) -> None:
        try:
            if not compile_now:
                b.key = kernel_key(b.source)
                return
            compiled = compile_kernel(b.source)
            check_loadable(compiled.path)
            b.key = compiled.key
        except KernelCompileError as e:
            b.error = f"its kernel cannot be built: {e}"

    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        list(pool.map(work, built))


def _replace(graph: Graph, b: _Built, renamed: dict[TensorRef, TensorRef]) -> None:
    group, kernel = b.group, b.kernel
    outputs = [
        TensorInfo(p.dtype, graph.info(TensorRef.parse(p.tensor)).shape) for p in kernel.outputs
    ]
    node = Node(
        b.node_name,
        OP_NAME,
        [renamed.get(r, r) for r in (TensorRef.parse(p.tensor) for p in kernel.inputs)],
        {**b.attrs, "cache_key": b.key.encode()},
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


def _info(b: _Built) -> KernelInfo:
    try:
        cuda_source, unsupported = emit_cuda(b.kernel), ""
    except CudaUnsupported as e:
        cuda_source, unsupported = "", str(e)
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


def _scope(names: list[str]) -> str:
    parts = [n.split("/")[:-1] for n in names]
    common: list[str] = []
    for level in zip(*parts, strict=False):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return "/".join(common) + "/" if common else ""


def _sanitize(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)
