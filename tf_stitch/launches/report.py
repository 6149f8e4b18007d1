"""`count_launches`: kernels executed per step by TensorFlow, by tf_stitch and by XLA:CPU."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import tensorflow as tf

from tf_stitch import hook
from tf_stitch.fusion.host_cpu import onednn_enabled
from tf_stitch.fusion.legality import has_cpu_only_epilogues
from tf_stitch.fusion.op_kinds import FLOAT_DTYPES
from tf_stitch.fusion.siblings import has_cpu_only_splits
from tf_stitch.graph.callable import IMPORT_SCOPE
from tf_stitch.graph.frontends import is_keras_model
from tf_stitch.graph.ir import INT_DTYPES, Graph
from tf_stitch.graph.op_view import graph_of_function
from tf_stitch.launches.gpu_launches import GpuLaunches, count_gpu_launches
from tf_stitch.launches.hlo_kernels import HloKernels, count_xla_cpu_launches
from tf_stitch.launches.op_launches import OpLaunches, count_tf_launches
from tf_stitch.optimize import OptimizedFunction, StitchFunction, optimize
from tf_stitch.passes.nchw_layout import has_nhwc_convolutions, needs_nchw_host
from tf_stitch.passes.packed_accumulators import has_packed_accumulators


@dataclass
class LaunchReport:
    """Kernels per step of one function three ways, and what tf_stitch's graph would launch on
    a GPU (`tf_stitch_gpu`, see `launches/gpu_launches.py`). `str()` gives a table."""

    tf: int
    tf_stitch: int
    xla_cpu: int | None
    tf_detail: OpLaunches
    tf_stitch_detail: OpLaunches
    xla_cpu_detail: HloKernels | None
    notes: list[str] = field(default_factory=list)
    # None where this host cannot run the graph planned for a GPU (NCHW convolutions without
    # oneDNN; see `notes`).
    tf_stitch_gpu: int | None = 0
    tf_stitch_gpu_detail: GpuLaunches | None = None
    tf_gpu: int = 0  # the same GPU model applied to TensorFlow's run of the original
    tf_gpu_detail: GpuLaunches | None = None
    # The graph counted for a GPU: the one optimize() gives for a GPU (NCHW convolutions).
    gpu_optimized: OptimizedFunction | None = None
    # tf_stitch's kernel launches per step by the float dtypes each stores ("float16+float32":
    # a kernel of Keras' mixed precision reading one and writing the other)
    stitched_by_dtype: dict[str, int] = field(default_factory=dict)
    # With tf_stitch.enable() on: the original function as TensorFlow runs it then, stitched
    # by the graph optimization pass (tf_stitch/hook.py); None when it is off.
    tf_enabled: int | None = None
    tf_enabled_detail: OpLaunches | None = None

    def __str__(self) -> str:
        xla = "n/a" if self.xla_cpu is None else str(self.xla_cpu)
        rows = [
            ("TensorFlow (graph, Grappler on)", str(self.tf)),
            ("TensorFlow on a GPU (counted from its ops)", str(self.tf_gpu)),
            ("XLA:CPU (jit_compile=True)", xla),
            ("tf_stitch", str(self.tf_stitch)),
            (
                "tf_stitch on a GPU (counted from its ops)",
                "n/a" if self.tf_stitch_gpu is None else str(self.tf_stitch_gpu),
            ),
        ]
        if self.tf_enabled is not None:
            rows.append(("TensorFlow with tf_stitch.enable()", str(self.tf_enabled)))
        width = max(len(r[0]) for r in rows)
        lines = [f"{'kernels per step':<{width}}  count"]
        lines += [f"{name:<{width}}  {value:>5}" for name, value in rows]
        if self.stitched_by_dtype:
            parts = ", ".join(f"{d} x {n}" for d, n in sorted(self.stitched_by_dtype.items()))
            lines.append(f"tf_stitch's kernels by dtype: {parts}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def stitched_by_dtype(ops: OpLaunches, graph: Graph) -> dict[str, int]:
    """StitchedKernel launches per step of `ops` (a traced run of `graph`) by the float dtypes
    the kernel reads and writes (by its integer dtypes where it has no floats; "other": a node
    the trace names that the graph does not have, one inside a loop's body)."""
    counts: Counter[str] = Counter()
    per_step = ops.per_step / max(sum(ops.runs.values()), 1)
    for run, n in ops.runs.items():
        if run.op != "StitchedKernel":
            continue
        node = graph.nodes.get(run.node.removeprefix(IMPORT_SCOPE + "/"))
        if node is None:
            counts["other"] += n
            continue
        infos = [graph.info(r) for r in node.inputs] + list(node.outputs)
        floats = sorted({i.dtype for i in infos if i.dtype in FLOAT_DTYPES})
        ints = sorted({i.dtype for i in infos if i.dtype in INT_DTYPES})
        counts["+".join(floats or ints) or "bool"] += n
    return {d: round(n * per_step) for d, n in counts.items()}


def count_launches(fn: Any, *inputs: Any, steps: int = 3) -> LaunchReport:
    """Counts the kernels one call of `fn(*inputs)` executes, measured, three ways.

    TF and tf_stitch: the ops TensorFlow's executor runs per step, read from a real profiler
    trace (`tf_stitch.launches.op_launches`), leaving out ops that launch no kernel (Const,
    Identity, NoOp, _Arg/_Retval, Reshape-like aliases, Shape-like metadata, function calls).
    TF runs `fn` as a `tf.function` with Grappler on, as users run it; tf_stitch runs the
    optimized graph (optimizing `fn` first unless it already is an optimized function).
    XLA:CPU: the kernels of the module `tf.function(fn, jit_compile=True)` compiles (fusions,
    library calls, copies and other unfused instructions of the entry computation, loop bodies
    times their trip counts), from its optimized HLO. None if XLA cannot compile `fn`.
    On a GPU (`tf_gpu`, `tf_stitch_gpu`): both traced runs mapped to the kernels TensorFlow's
    GPU kernels would launch for them (`launches/gpu_launches.py`), so that the two compare
    like with like. tf_stitch's is the graph optimize() gives for a GPU: where `fn` has NHWC
    float32 convolutions, or a library call's activation that TensorFlow fuses into the call
    on a CPU only (a sigmoid after a dense layer), or independent kernels of one layer that
    only a GPU's plan merges (fusion/siblings.py), it is optimized again with
    `conv_layout="NCHW"` (planned for a GPU) and that graph is run and traced
    (`gpu_optimized`).
    With `tf_stitch.enable()` on, TensorFlow's count is taken with it paused, and the original
    run as TensorFlow runs it with the pass is counted too (`tf_enabled`).
    """
    if not callable(fn):
        raise TypeError(f"count_launches needs a function or a Keras model, not {fn!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, not {steps!r}")
    enabled = hook.is_enabled()
    with hook.paused():  # TensorFlow's own count is of TensorFlow's graph
        report, original = _count_launches(fn, inputs, steps)
    if enabled:
        report.tf_enabled_detail = count_tf_launches(original, inputs, steps=steps)
        report.tf_enabled = report.tf_enabled_detail.per_step
    return report


def _count_launches(fn: Any, inputs: tuple[Any, ...], steps: int) -> tuple[LaunchReport, Any]:
    """The report, and the original function TensorFlow's count ran."""
    original, call_optimized, optimized, python_fn = _variants(fn, inputs)
    if not onednn_enabled() and (nchw := needs_nchw_host(optimized.graph)):
        raise RuntimeError(
            f"this function was optimized for a GPU: {nchw[0]} ({len(nchw)} ops) runs NCHW, "
            f"which TensorFlow's CPU kernels here run only with oneDNN, and oneDNN is off in "
            "this process; count it on a GPU, or set TF_ENABLE_ONEDNN_OPTS=1 before "
            "TensorFlow is imported"
        )
    tf_count = count_tf_launches(original, inputs, steps=steps)
    stitch_count = count_tf_launches(call_optimized, inputs, steps=steps)
    notes = []
    try:
        xla: HloKernels | None = count_xla_cpu_launches(python_fn, inputs)
    except RuntimeError as e:
        xla = None
        notes.append(f"XLA:CPU could not compile the function: {str(e).splitlines()[0]}")
    for name, c in (("TF", tf_count), ("tf_stitch", stitch_count)):
        if c.min_per_step != c.max_per_step:
            notes.append(f"{name} ran {c.min_per_step}..{c.max_per_step} kernels per step")
    if xla is not None:
        notes.extend(xla.notes)
    gpu_optimized: OptimizedFunction | None
    gpu_optimized, call_gpu = _gpu_variant(optimized, call_optimized)
    gpu_run: OpLaunches | None = stitch_count
    if gpu_optimized is not optimized:
        if not onednn_enabled() and (nchw := needs_nchw_host(gpu_optimized.graph)):
            notes.append(
                "GPU count: n/a, the graph optimized for a GPU runs NCHW convolutions or pools "
                f"({len(nchw)} ops), which TensorFlow's CPU kernels here run only with oneDNN, "
                "and oneDNN is off in this process (set TF_ENABLE_ONEDNN_OPTS=1 before "
                "TensorFlow is imported to trace it)"
            )
            gpu_optimized = gpu_run = None
        else:
            gpu_run = count_tf_launches(call_gpu, inputs, steps=steps)
            notes.append("GPU count: of the graph optimized for a GPU (NCHW convolutions)")
    gpu: GpuLaunches | None = None
    if gpu_optimized is not None and gpu_run is not None:
        cuda = {k.node for k in gpu_optimized.kernels if k.cuda_source}
        gpu = count_gpu_launches(gpu_run, gpu_optimized.graph, cuda)
        notes.extend(f"GPU count: {n}" for n in gpu.notes)
    concrete = original.get_concrete_function(*inputs) if not _is_concrete(original) else original
    tf_gpu = count_gpu_launches(tf_count, graph_of_function(concrete), ())
    notes.extend(f"TensorFlow's GPU count: {n}" for n in tf_gpu.notes)
    report = LaunchReport(
        tf_count.per_step,
        stitch_count.per_step,
        None if xla is None else xla.total,
        tf_count,
        stitch_count,
        xla,
        notes,
        None if gpu is None else gpu.total,
        gpu,
        tf_gpu.total,
        tf_gpu,
        gpu_optimized,
        stitched_by_dtype(stitch_count, optimized.graph),
    )
    return report, original


def _gpu_variant(
    optimized: OptimizedFunction, call: Callable[..., Any]
) -> tuple[OptimizedFunction, Callable[..., Any]]:
    """The function optimize() gives for a GPU, called like `call`: `optimized` itself unless it
    has NHWC convolutions that a GPU's layout would change, epilogues a GPU does not fuse, or
    independent kernels a GPU's plan would merge."""
    planned = optimized.context.options.gpu
    if planned or not (
        has_nhwc_convolutions(optimized.graph)
        or has_cpu_only_epilogues(optimized.graph)
        or has_cpu_only_splits(optimized.context.records)
        or has_packed_accumulators(optimized.context.records)
    ):
        return optimized, call
    gpu = optimize(optimized.original, conv_layout="NCHW", freeze=not optimized.live_variables)
    if call is optimized:
        return gpu, gpu

    def call_with_list(*args: Any) -> Any:
        return gpu(list(args))

    return gpu, call_with_list


class _Variants(NamedTuple):
    original: Any  # the original as a graph function
    call_optimized: Callable[..., Any]  # the optimized function, called like `fn`
    optimized: OptimizedFunction
    python: Callable[..., Any]  # a Python function for XLA


def _variants(fn: Any, inputs: tuple[Any, ...]) -> _Variants:
    specs = [tf.TensorSpec.from_tensor(tf.convert_to_tensor(x)) for x in inputs]
    if isinstance(fn, OptimizedFunction):
        original = fn.original
        return _Variants(original, fn, fn, _python(original))
    if isinstance(fn, StitchFunction):
        optimized = fn.get_optimized(*inputs)
        return _Variants(fn.tf_function, optimized, optimized, fn.python_function)
    if is_keras_model(fn):
        model = fn

        def call(*args: Any) -> Any:
            return model(args[0] if len(args) == 1 else list(args), training=False)

        keras_optimized = optimize(fn, input_signature=specs)
        if len(inputs) == 1:
            return _Variants(tf.function(call), keras_optimized, keras_optimized, call)

        def call_with_list(*args: Any) -> Any:
            return keras_optimized(list(args))

        return _Variants(tf.function(call), call_with_list, keras_optimized, call)
    graph_fn = fn if hasattr(fn, "get_concrete_function") else tf.function(fn)
    concrete = graph_fn.get_concrete_function(*specs) if not _is_concrete(fn) else fn
    optimized = optimize(concrete)
    return _Variants(graph_fn, optimized, optimized, _python(fn))


def _is_concrete(fn: Any) -> bool:
    from tensorflow.python.eager.polymorphic_function.concrete_function import ConcreteFunction

    return isinstance(fn, ConcreteFunction)


def _python(fn: Any) -> Callable[..., Any]:
    if _is_concrete(fn):
        return lambda *args: fn(*args)
    return getattr(fn, "python_function", fn)
