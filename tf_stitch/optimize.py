"""`optimize`, `explain` and `function`: the optimizer's public entry points."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import tensorflow as tf

from tf_stitch.collector import collector_paused
from tf_stitch.graph import frontends
from tf_stitch.graph.callable import GraphFunction, eager_constant, function_from_graph_def
from tf_stitch.graph.held_constants import held_constants
from tf_stitch.graph.io import GraphDef, graph_to_graph_def, infer_shapes
from tf_stitch.graph.ir import Graph, TensorRef
from tf_stitch.graph.variable_reads import read_in_place
from tf_stitch.graph.variable_writes import write_in_kernels
from tf_stitch.passes.base import Options, PassContext
from tf_stitch.passes.pipeline import run_pipeline
from tf_stitch.runtime import op_library


class OptimizedFunction(GraphFunction):
    """A stitched function with the original's calling convention.

    `graph` is the optimized graph (`graph_def` its GraphDef, made when first read),
    `original` the ConcreteFunction it came from and `context` what the optimizer decided
    (kernels, reasons, warnings). `variables` are the live variables: Placeholder node name ->
    resource handle; each call reads them (none if the function was frozen), those in
    `read_in_place` inside the kernels that read them (graph/variable_reads.py);
    `written_in_kernels` maps the variable writes a kernel does itself to that kernel
    (graph/variable_writes.py). TensorFlow runs the graph with its large constants held by
    reference (graph/held_constants.py): they are not copied into the function it builds.
    """

    def __init__(
        self,
        graph: Graph,
        context: PassContext,
        original: Any,
        structured_inputs: Any,
        structured_outputs: Any,
        variables: dict[str, Any] | None = None,
    ) -> None:
        specs = [_spec(graph, r) for r in graph.inputs]
        held = held_constants(graph)
        runnable = graph_to_graph_def(graph, as_placeholders=held)
        self.read_in_place = read_in_place(runnable, variables or {})
        outputs = [str(r) for r in graph.outputs]
        targets, self.written_in_kernels = write_in_kernels(
            runnable, variables or {}, outputs, graph.targets
        )
        flat = function_from_graph_def(
            runnable,
            [str(r) for r in graph.inputs],
            outputs,
            specs,
            {name: eager_constant(v.array, v.dtype) for name, v in held.items()},
            variables,
            targets,
        )
        super().__init__(flat, structured_inputs, structured_outputs, _param_names(original), specs)
        self.graph = graph
        self.context = context
        self.original = original
        self.variables = dict(variables or {})
        self._graph_def: GraphDef | None = None

    @property
    def graph_def(self) -> GraphDef:
        """The optimized graph as a GraphDef, its constants as constants and its live
        variables as Placeholders of their values (named in `variables`)."""
        if self._graph_def is None:
            self._graph_def = graph_to_graph_def(self.graph)
        return self._graph_def

    @property
    def kernels(self) -> list[Any]:
        return self.context.kernels


def _param_names(concrete: Any) -> list[str]:
    function_type = getattr(concrete, "function_type", None)
    if function_type is None:
        return []
    return [p.name for p in function_type.parameters.values()]


def _spec(graph: Graph, ref: TensorRef) -> tf.TensorSpec:
    info = graph.info(ref)
    return tf.TensorSpec(info.shape, tf.as_dtype(info.dtype))


def optimize(
    obj: Any,
    *,
    outputs: Sequence[str] | None = None,
    inputs: Sequence[str] | None = None,
    input_signature: Sequence[tf.TensorSpec] | None = None,
    on_chip_budget: int | None = None,
    cuda: bool = False,
    conv_layout: str | None = None,
    freeze: bool = False,
) -> Any:
    """Stitches the memory-bound ops of a graph into fused kernels.

    A GraphDef (or its serialized bytes) gives a GraphDef; `outputs` names the tensors to keep
    (default: every output of the nodes nobody reads), `inputs` the feeds (default: the
    Placeholders). A ConcreteFunction, a tf.function (traced with `input_signature` if it has
    none) or a Keras model gives an `OptimizedFunction` called like the original. Its
    variables stay live: every call reads them, so `assign`, `set_weights` and optimizer
    updates are seen; a function that writes variables (a training step) writes them with
    TensorFlow's own ops, in its order. `freeze=True` freezes them into constants instead, as
    TF-TRT does (later changes are not seen; the optimizer may then fold them, e.g. batch norms
    into convolution filters; a function that writes variables then raises
    `VariableWriteError`).
    Groups whose kernel cannot be built stay as TensorFlow ops, with a
    warning; if the optimized graph fails validation the original graph is returned.

    `cuda=True` also builds each kernel as CUDA (nvcc, sm_80/sm_90 fatbins): those nodes run
    their CUDA build where TensorFlow places them on a GPU, and the CPU kernel elsewhere.
    Without nvcc, one warning says so and the kernels are CPU-only.

    `conv_layout` is the layout convolutions run in: "NHWC" (the graph's, a CPU's) or "NCHW"
    (a GPU's for float32: the convolutions, the ops around them and the stitched kernels
    between them in NCHW, so that TensorFlow's layout optimizer adds no transposes around the
    kernels; TensorFlow's CPU kernels run it too). Default: "NCHW" with `cuda=True`, else
    "NHWC". A graph with `cuda=True` or NCHW convolutions is planned for a GPU: an activation
    TensorFlow's GPU library calls do not fuse (all but ReLU and GELU) is stitched with its
    matmul or bias add, where on a CPU oneDNN's fused call takes it.
    """
    with collector_paused():
        frontend = frontends.load(
            obj, inputs=inputs, outputs=outputs, input_signature=input_signature, freeze=freeze
        )
        graph, ctx = optimize_graph(frontend.graph, on_chip_budget, cuda, conv_layout=conv_layout)
        if frontend.kind == "graph_def":
            return graph_to_graph_def(graph)
        original = (
            obj
            if frontend.structured_inputs is None
            else frontends.concrete_function_of(obj, input_signature)
        )
        return OptimizedFunction(
            graph,
            ctx,
            original,
            frontend.structured_inputs,
            frontend.structured_outputs,
            frontend.variables,
        )


def optimize_graph(
    graph: Graph,
    on_chip_budget: int | None,
    cuda: bool = False,
    fallback: bool = False,
    conv_layout: str | None = None,
) -> tuple[Graph, PassContext]:
    op_library.load()
    layout = conv_layout or ("NCHW" if cuda else "NHWC")
    options = Options(cuda=cuda, fallback=fallback, conv_layout=layout)
    if on_chip_budget is not None:
        options = replace(options, on_chip_budget=on_chip_budget)
    optimized, ctx = run_pipeline(graph, options)
    problem = validate(graph, optimized)
    if problem:
        message = (
            f"tf_stitch: the optimized graph failed validation ({problem}); returning the original"
        )
        ctx.warnings.append(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        ctx.kernels.clear()
        return graph, ctx
    return optimized, ctx


def validate(original: Graph, optimized: Graph) -> str:
    """Re-imports the optimized graph with TensorFlow (its large weights as placeholders of
    their shape); '' if it keeps the feeds and fetches."""
    for ref in [*optimized.inputs, *optimized.outputs]:
        node = optimized.nodes.get(ref.node)
        if node is None or ref.index >= len(node.outputs):
            return f"the graph has no tensor {ref}"
    try:
        again = infer_shapes(optimized)
    except ValueError as e:
        return str(e)
    if len(again.outputs) != len(original.outputs):
        return "the number of outputs changed"
    for name in ("inputs", "outputs"):
        before, after = getattr(original, name), getattr(optimized, name)
        if before != after:
            moved = [f"{a} -> {b}" for a, b in zip(before, after, strict=False) if a != b]
            return f"the requested {name} changed ({', '.join(moved[:3]) or 'their number'})"
    for a, b in zip(original.outputs, again.outputs, strict=True):
        x, y = original.info(a), again.info(b)
        if x.dtype != y.dtype or x.rank != y.rank:
            return f"output {a} changed from {x} to {y}"
    return ""


def explain(obj: Any, **kwargs: Any) -> str:
    """What the optimizer does with `obj`: kernels, their members and schedules, and every
    fusion decision with its reason. Accepts what `optimize` accepts, or its result."""
    if isinstance(obj, OptimizedFunction):
        return format_context(obj.context)
    return format_context(_planned(obj, kwargs))


def _planned(obj: Any, kwargs: dict[str, Any]) -> PassContext:
    """The optimizer's context for `obj` (kernels generated, not compiled)."""
    frontend = frontends.load(
        obj,
        inputs=kwargs.get("inputs"),
        outputs=kwargs.get("outputs"),
        input_signature=kwargs.get("input_signature"),
        freeze=kwargs.get("freeze", False),
    )
    _, ctx = run_pipeline(frontend.graph, Options(compile=False))
    return ctx


def generated_code(obj: Any, target: str = "cpu", **kwargs: Any) -> dict[str, str]:
    """The generated source of every stitched kernel of `obj`, by kernel node name: the C++ the
    CPU runs (`target="cpu"`), or the CUDA (`target="cuda"`; kernels the CUDA emitter cannot
    emit, e.g. over the shared-memory limit, are left out).

    Accepts what `optimize` accepts (the kernels are generated, not compiled), or its result.
    """
    if target not in ("cpu", "cuda"):
        raise ValueError(f"target must be 'cpu' or 'cuda', got {target!r}")
    kernels = obj.kernels if isinstance(obj, OptimizedFunction) else _planned(obj, kwargs).kernels
    if target == "cuda":
        return {k.node: k.cuda_source for k in kernels if k.cuda_source}
    return {k.node: k.source for k in kernels}


def format_context(ctx: PassContext) -> str:
    lines = [f"tf_stitch: {len(ctx.kernels)} stitched kernel(s)"]
    for k in ctx.kernels:
        lines.append(f"kernel {k.node}: {k.schedule}")
        lines.append(f"  {len(k.members)} ops: " + ", ".join(k.members))
        lines.append("  inputs: " + ", ".join(k.inputs))
        lines.append("  outputs: " + ", ".join(k.outputs))
        lines.append(f"  on chip: {k.memory}")
    lines.append("decisions:")
    lines.extend(f"  {r}" for r in ctx.records)
    if ctx.warnings:
        lines.append("warnings:")
        lines.extend(f"  {w}" for w in ctx.warnings)
    return "\n".join(lines)


class StitchFunction:
    """`@tf_stitch.function`: like `tf.function`, optimizing each traced signature once.
    Variables stay live unless `freeze=True` (see `optimize`)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        input_signature: Any = None,
        on_chip_budget: int | None = None,
        freeze: bool = False,
    ) -> None:
        self.python_function = fn
        self.tf_function = tf.function(fn, input_signature=input_signature)
        self._on_chip_budget = on_chip_budget
        self._freeze = freeze
        self._cache: dict[int, tuple[Any, OptimizedFunction]] = {}

    def get_optimized(self, *args: Any, **kwargs: Any) -> OptimizedFunction:
        concrete = self.tf_function.get_concrete_function(*args, **kwargs)
        hit = self._cache.get(id(concrete))
        if hit is None or hit[0] is not concrete:
            optimized = optimize(concrete, on_chip_budget=self._on_chip_budget, freeze=self._freeze)
            hit = (concrete, optimized)
            self._cache[id(concrete)] = hit
        return hit[1]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.get_optimized(*args, **kwargs)(*args, **kwargs)


def function(
    fn: Callable[..., Any] | None = None,
    *,
    input_signature: Any = None,
    on_chip_budget: int | None = None,
    freeze: bool = False,
) -> Any:
    """Decorator: `@tf_stitch.function` or `@tf_stitch.function(input_signature=[...])`.
    Variables stay live (read at every call) unless `freeze=True`."""
    if fn is None:
        return lambda f: StitchFunction(f, input_signature, on_chip_budget, freeze)
    return StitchFunction(fn, input_signature, on_chip_budget, freeze)
