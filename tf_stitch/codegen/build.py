"""Building a plan's kernels: lower -> emit -> compile, in parallel, each group's kernel or why not.

`build_kernels` takes the fusion plan and returns what the `outline` pass needs to rewrite the
graph: every kernel it built (its IR, C++ or emulated source, the op's attributes, the compiled
library's key and, with CUDA, the fatbin's attributes), and every decision made on the way
(bundles made; refusals, such as a group that cannot be lowered or nvcc missing, each with the
message to warn with). A kernel whose C++ does not compile is returned with its `error` set:
leaving its group to TensorFlow is the rewrite's part (where a fallback function may fail too).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

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
from tf_stitch.fusion.decision import Decision, Record, RecordKind, allow, forbid
from tf_stitch.fusion.planner import Group, Plan
from tf_stitch.graph.ir import Graph
from tf_stitch.graph.names import c_identifier, common_scope


@dataclass(frozen=True)
class BuildOptions:
    # The kernels' source: "cpu" (the C++ emitter) or "simt" (the CUDA source, emulated).
    kernel_source: str = "cpu"
    # Compile now (False: only the cache keys, for tests of the rewrite's structure).
    compile: bool = True
    # Also compile every kernel the CUDA emitter handles with nvcc.
    cuda: bool = False
    # Planned for a GPU (fusion/bundles.py bundles differently there).
    gpu: bool = False


@dataclass
class BuiltKernel:
    """One group's kernel, ready for the graph (unless `error` says why it is not)."""

    group: Group
    node_name: str
    kernel: Kernel
    source: str
    attrs: dict[str, Any]
    key: str = ""
    error: str = ""  # why its C++ did not compile
    cuda_source: str = ""
    cuda_function: str = ""  # its `__global__` function's name
    cuda_unsupported: str = ""  # why the kernel has no CUDA build
    cuda_attrs: dict[str, Any] = field(default_factory=dict)  # of its CUDA build, if built


@dataclass
class Built:
    kernels: list[BuiltKernel] = field(default_factory=list)
    # Every decision, in the order made: bundles made and refused, groups and CUDA builds
    # refused; `warnings` has the message that tells the user of each refusal.
    records: list[Record] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def log(self, subject: str, decision: Decision) -> Decision:
        self.records.append(Record(subject, decision))
        return decision

    def refuse(self, kind: RecordKind, subject: str, reason: str, message: str) -> None:
        self.records.append(Record(subject, forbid(reason), kind))
        self.warnings.append(message)


def build_kernels(graph: Graph, plan: Plan, options: BuildOptions, compilers: Compilers) -> Built:
    """Every kernel of `plan`'s groups (and bundles of its singles) over `graph`, compiled."""
    built = Built()
    kernels = [k for g in plan.groups if (k := _generate(graph, g, options, built)) is not None]
    singles = [k for g in plan.singles if (k := _generate(graph, g, options, None)) is not None]
    built.kernels = _bundled(graph, kernels, singles, options, built)
    _compile_all(built.kernels, options.compile, compilers)
    if options.cuda and options.compile:
        _build_cuda(built, compilers)
    return built


def _generate(
    graph: Graph, group: Group, options: BuildOptions, report: Built | None
) -> BuiltKernel | None:
    """`group`'s kernel, lowered and emitted (not compiled); None if it cannot be generated,
    refused in `report` unless that is None (a single op's group is only a candidate)."""
    node_name = graph.unique_name(f"{common_scope(group.names)}stitched_{group.id}")
    try:
        kernel = lower(graph, group, c_identifier(node_name))
        cpu = options.kernel_source == "cpu"
        source = emit_cpu(kernel) if cpu else emulated_source(kernel)
        # Encoded now, so that a group the op cannot describe never reaches the graph.
        attrs = stitched_kernel_attrs(kernel, source, "")
        b = BuiltKernel(group, node_name, kernel, source, attrs)
        try:
            b.cuda_source, b.cuda_function = content_named_cuda(kernel)
        except CudaUnsupported as e:
            b.cuda_unsupported = str(e)
        return b
    except (LoweringError, ValueError, CudaUnsupported) as e:
        if report is not None:
            message = f"tf_stitch: group {node_name} stays as TensorFlow ops: {e}"
            report.refuse(RecordKind.CODEGEN, f"group {group.id} ({node_name})", str(e), message)
        return None


def _bundled(
    graph: Graph,
    kernels: list[BuiltKernel],
    singles: list[BuiltKernel],
    options: BuildOptions,
    report: Built,
) -> list[BuiltKernel]:
    """`kernels` with the independent elementwise kernels that fusion/bundles.py puts together
    made one bundle kernel each (codegen/bundle.py); `singles` (kernels of one op) are
    candidates too, but those left out of every bundle stay TensorFlow ops."""
    eligible = [b for b in kernels + singles if b.group.attention is None and bundleable(b.kernel)]
    chosen = plan_bundles(graph, [b.group for b in eligible], options.gpu, report.log)
    if not chosen:
        return kernels
    taken: set[int] = set()
    bundles = []
    for indices in chosen:
        parts = [eligible[i] for i in indices]
        taken.update(id(p) for p in parts)
        names = [n for p in parts for n in p.group.names]
        node_name = graph.unique_name(f"{common_scope(names)}bundle_{parts[0].group.id}")
        made = bundle(c_identifier(node_name), [p.kernel for p in parts])
        cpu = options.kernel_source == "cpu"
        source = emit_cpu_bundle(made) if cpu else emulated_bundle_source(made)
        group = dataclasses.replace(
            parts[0].group,
            nodes=[n for p in parts for n in p.group.nodes],
            inputs=list(dict.fromkeys(r for p in parts for r in p.group.inputs)),
            outputs=[r for p in parts for r in p.group.outputs],
        )
        attrs = stitched_kernel_attrs(made.kernel, source, "")
        b = BuiltKernel(group, node_name, made.kernel, source, attrs)
        b.cuda_source, b.cuda_function = content_named_cuda_bundle(made)
        bundles.append(b)
        members = ", ".join(p.node_name for p in parts)
        reason = f"{len(parts)} independent elementwise kernels launched as one: {members}"
        report.log(f"bundle {node_name}", allow(reason))
    return [b for b in kernels if id(b) not in taken] + bundles


def _compile_all(kernels: list[BuiltKernel], compile_now: bool, compilers: Compilers) -> None:
    """Compiles every distinct C++ source once, all of them at once (a model's repeated layers
    share their kernels' sources)."""

    def work(source: str) -> str | KernelCompileError:
        try:
            return compilers.cpu(source) if compile_now else compilers.key(source)
        except KernelCompileError as e:
            return e

    keys = _once_each((b.source for b in kernels), work)
    for b in kernels:
        key = keys[b.source]
        if isinstance(key, KernelCompileError):
            b.error = f"its kernel cannot be built: {key}"
        else:
            b.key = key


def _build_cuda(built: Built, compilers: Compilers) -> None:
    """Compiles every distinct CUDA source into a fatbin (nvcc), once, all of them at once."""

    def work(source: str) -> str | KernelCompileError:
        try:
            return compilers.cuda(source)
        except KernelCompileError as e:  # NvccMissing among them
            return e

    kernels = built.kernels
    fatbins = _once_each((b.cuda_source for b in kernels if not b.error and b.cuda_source), work)
    problems = set()
    for b in kernels:
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
        built.refuse(RecordKind.CUDA, "nvcc", message, f"tf_stitch: {message}")


_T = TypeVar("_T")


def _once_each(sources: Iterable[str], work: Callable[[str], _T]) -> dict[str, _T]:
    """`work` of every distinct source, once each, all of them at once across the cores."""
    distinct = sorted(set(sources))
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        return dict(zip(distinct, pool.map(work, distinct), strict=True))
