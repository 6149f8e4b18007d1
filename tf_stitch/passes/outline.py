"""outline: each planned group becomes one StitchedKernel node running its generated kernel.

The kernels are built first (codegen/build.py: lowered, emitted and compiled, in parallel); a
group whose kernel cannot be generated or compiled stays as its original TensorFlow ops, with a
warning that says why. Fetched tensors keep their node names through an Identity reading the
kernel's output. With `Options.cuda`, every kernel the CUDA emitter handles is also compiled by
nvcc; its node then carries the fatbin's key and `_kernel: "cuda"`, which selects the op's GPU
kernel on a GPU. With `Options.fallback`, every node also carries its group's ops as a function
(fallback.py).
"""

from __future__ import annotations

import tensorflow as tf

from tf_stitch.codegen.build import BuildOptions, BuiltKernel, build_kernels
from tf_stitch.codegen.compilers import Compilers
from tf_stitch.fusion.decision import Record, RecordKind, forbid
from tf_stitch.graph.ir import AttrList, DType, FuncRef, Graph, Node, TensorInfo, TensorRef
from tf_stitch.passes.base import KernelInfo, PassContext, graph_pass
from tf_stitch.passes.fallback import add_functions, fallback_function

OP_NAME = "StitchedKernel"


@graph_pass("outline")
def outline(graph: Graph, ctx: PassContext) -> Graph:
    """Replaces every planned group by one StitchedKernel node."""
    if ctx.plan is None or not (ctx.plan.groups or ctx.plan.singles):
        return graph
    out = graph.copy()
    o = ctx.options
    options = BuildOptions(o.kernel_source, o.compile, o.cuda, o.gpu)
    built = build_kernels(out, ctx.plan, options, _compilers(ctx))
    ctx.records.extend(built.records)
    for message in built.warnings:
        ctx.warn(message)
    renamed: dict[TensorRef, TensorRef] = {}  # outputs of groups already replaced
    functions = []
    for b in built.kernels:
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


def _compilers(ctx: PassContext) -> Compilers:
    if ctx.compilers is None:
        raise ValueError(
            "the outline pass builds kernels with ctx.compilers, and none were given "
            "(optimize() passes tf_stitch.runtime.compilers.COMPILERS)"
        )
    return ctx.compilers


def _input_refs(b: BuiltKernel) -> list[TensorRef]:
    return [p.tensor for p in b.kernel.inputs]


def _replace(graph: Graph, b: BuiltKernel, renamed: dict[TensorRef, TensorRef]) -> None:
    group, kernel = b.group, b.kernel
    outputs = [TensorInfo(p.dtype, graph.info(p.tensor).shape) for p in kernel.outputs]
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


def _info(b: BuiltKernel) -> KernelInfo:
    return KernelInfo(
        node=b.node_name,
        name=b.kernel.name,
        members=b.kernel.members,
        schedule=b.kernel.schedule,
        memory="; ".join(filter(None, (str(b.group.memory), b.kernel.buffer_reuse))),
        inputs=[str(p.tensor) for p in b.kernel.inputs],
        outputs=[str(p.tensor) for p in b.kernel.outputs],
        source=b.source,
        cache_key=b.key,
        cuda_source=b.cuda_source,
        cuda_unsupported=b.cuda_unsupported,
    )
