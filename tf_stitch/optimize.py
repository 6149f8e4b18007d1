"""`optimize`, `explain` and `function`: the optimizer's public entry points."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import tensorflow as tf
from tensorflow.python.ops import control_flow_util
from tensorflow.python.trackable.base import no_automatic_dependency_tracking

from tf_stitch.collector import collector_paused
from tf_stitch.fusion.decision import RecordKind
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
from tf_stitch.runtime.compilers import COMPILERS


class OptimizedFunction(GraphFunction, tf.Module):
    """A stitched function with the original's calling convention, and a `tf.Module`:
    `tf.saved_model.save(optimized, path)` saves it with its live variables, its `serve`
    function (the flat tensors in, named as the original's parameters) the default signature.
    Loading it needs tf_stitch's op library (`import tf_stitch`; see serving.py).

    `graph` is the optimized graph (`graph_def` its GraphDef, made when first read),
    `original` the ConcreteFunction it came from and `context` what the optimizer decided
    (kernels, reasons, warnings). `live_variables` are the live variables: Placeholder node
    name -> resource handle; each call reads them (none if the function was frozen), those in
    `read_in_place` inside the kernels that read them (graph/variable_reads.py);
    `written_in_kernels` maps the variable writes a kernel does itself to that kernel
    (graph/variable_writes.py); `variables` (tf.Module's) are those tf.Variables. TensorFlow
    runs the graph with its large constants held by reference (graph/held_constants.py): they
    are not copied into the function it builds.
    """

    @no_automatic_dependency_tracking
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
        GraphFunction.__init__(
            self, flat, structured_inputs, structured_outputs, _param_names(original), specs
        )
        tf.Module.__init__(self, name="optimized_function")
        self.graph = graph
        self.context = context
        self.original = original
        self.live_variables = dict(variables or {})
        self._graph_def: GraphDef | None = None
        self._warned_xla = False
        handles = {id(h) for h in self.live_variables.values()}
        originals = _graph_variables(original)
        tracked = [v for v in originals if id(v.handle) in handles]
        # Frozen: the original reads variables this graph holds as constants.
        self._frozen = bool(originals) and not self.live_variables
        self._setattr_tracking = True  # what saving needs: the variables
        self._live = tracked
        self._setattr_tracking = False
        self._serve: Any = None

    @property
    def serve(self) -> Any:
        """A tf.function of the flat input tensors (named as the original's parameters where
        they match one to one) returning a dict of tensors; traced when first asked for (by
        `tf.saved_model.save`: its default signature)."""
        if self._serve is None:
            self._serve = _serving_function(
                self.flat_fn, self.input_specs, self.param_names, self.structured_outputs
            )
        return self._serve

    @property
    def _default_save_signature(self) -> Any:
        return self.serve  # the name tf.saved_model.save looks for

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

    @tf.autograph.experimental.do_not_convert  # called inside tf.functions: run as written
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not in_xla_context():
            return GraphFunction.__call__(self, *args, **kwargs)
        # Traced for XLA (inside a jit_compile=True function): XLA cannot call tf_stitch's
        # kernels, so the original ops run, and XLA compiles and fuses them itself.
        if self._frozen:
            raise ValueError(
                "this optimized function was frozen (freeze=True) and cannot run inside a "
                "jit_compile=True function: XLA cannot call tf_stitch's kernels, and the "
                "original reads the variables' current values, not the frozen ones. Optimize "
                "it with its variables live, or call it outside the jit_compile function"
            )
        if not self._warned_xla:
            self._warned_xla = True
            warnings.warn(
                "tf_stitch: an optimized function called inside a jit_compile=True function "
                "runs its original ops there, which XLA compiles and fuses (XLA cannot call "
                "tf_stitch's kernels)",
                RuntimeWarning,
                stacklevel=2,
            )
        return self.original(*args, **kwargs)


def in_xla_context() -> bool:
    """Whether the graph being built is compiled by XLA (a jit_compile=True function's)."""
    return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


def _graph_variables(original: Any) -> list[Any]:
    graph = getattr(original, "graph", None)
    return list(getattr(graph, "variables", ()))


def _serving_function(
    flat: Any, specs: list[tf.TensorSpec], names: list[str], structured_outputs: Any
) -> Any:
    """A tf.function of the flat input tensors (named after the parameters where they match
    one to one) returning a dict of tensors: a SavedModel signature."""
    if len(names) != len(specs):
        names = [f"input_{i}" for i in range(len(specs))]
    named = [tf.TensorSpec(s.shape, s.dtype, name=n) for s, n in zip(specs, names, strict=True)]

    def serve(*tensors: Any) -> Any:
        outputs = list(flat(*tensors))
        if structured_outputs is not None:
            packed = tf.nest.pack_sequence_as(structured_outputs, outputs, expand_composites=True)
            if isinstance(packed, dict) and all(tf.is_tensor(v) for v in packed.values()):
                return packed
        return {f"output_{i}": t for i, t in enumerate(outputs)}

    function = tf.function(serve, input_signature=named)
    function.get_concrete_function()  # traced: tf.saved_model.save's default signature
    return function


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
    check_arguments(on_chip_budget, cuda, conv_layout, freeze)
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


def check_arguments(
    on_chip_budget: Any, cuda: Any, conv_layout: Any = None, freeze: Any = False
) -> None:
    """Raises TypeError/ValueError for arguments `optimize` cannot take, before any work."""
    if not isinstance(freeze, bool):
        raise TypeError(f"freeze must be True or False, got {freeze!r}")
    Options(cuda=cuda, conv_layout=conv_layout or "NHWC")  # checks them
    if on_chip_budget is not None:
        Options(on_chip_budget=on_chip_budget)


# What explain() and generated_code() take besides the object: optimize()'s frontend arguments.
_PLAN_ARGUMENTS = frozenset({"inputs", "outputs", "input_signature", "freeze"})


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
    optimized, ctx = run_pipeline(graph, options, COMPILERS)
    problem = validate(graph, optimized)
    if problem:
        message = (
            f"tf_stitch: the optimized graph failed validation ({problem}); returning the original"
        )
        ctx.refuse(RecordKind.VALIDATE, "the optimized graph", problem, message)
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
    unknown = sorted(set(kwargs) - _PLAN_ARGUMENTS)
    if unknown:
        raise TypeError(
            f"unexpected keyword argument(s) {unknown}; accepted: {sorted(_PLAN_ARGUMENTS)}"
        )
    frontend = frontends.load(
        obj,
        inputs=kwargs.get("inputs"),
        outputs=kwargs.get("outputs"),
        input_signature=kwargs.get("input_signature"),
        freeze=kwargs.get("freeze", False),
    )
    _, ctx = run_pipeline(frontend.graph, Options(compile=False), COMPILERS)
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
    lines.append(f"decisions: {len(ctx.records)}, each once (kind, then what: verdict)")
    lines.extend(f"  {line}" for line in ctx.records.table())
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
        if not callable(fn):
            raise TypeError(f"tf_stitch.function decorates a function, not {fn!r}")
        check_arguments(on_chip_budget, False, None, freeze)
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

    @tf.autograph.experimental.do_not_convert  # the optimizer runs as written, not converted
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if in_xla_context():  # XLA fuses the original itself (see OptimizedFunction.__call__)
            return self.tf_function(*args, **kwargs)
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
