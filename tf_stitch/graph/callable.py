"""Turns an (optimized) GraphDef back into something callable from TensorFlow 2."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context
from tensorflow.python.framework import ops
from tensorflow.python.util import nest

from tf_stitch.graph.io import GraphDef

IMPORT_SCOPE = "stitched"  # the name scope the graph's nodes run under (and are traced as)


def function_from_graph_def(
    graph_def: GraphDef,
    inputs: Sequence[str],
    outputs: Sequence[str],
    specs: Sequence[Any],
    held: Mapping[str, Any] | None = None,
    variables: Mapping[str, Any] | None = None,
    targets: Sequence[str] = (),
) -> Any:
    """A ConcreteFunction taking the `inputs` tensors (flat, in order, matching `specs`) and
    returning the `outputs` tensors of `graph_def` (imported when it is traced, once).

    `held` maps Placeholders of `graph_def` (node names) to the values they stand for: each
    becomes one tensor the function captures, so TensorFlow never copies it into the function's
    definition (see graph/held_constants.py). `variables` maps Placeholders to the resource
    handles of live variables: the function captures each handle and reads the variable (a
    ReadVariableOp) every time it runs; a resource Placeholder (a variable the graph writes)
    is the handle itself. Placeholders of `variables` the graph no longer has are skipped.
    `targets` are nodes that run with every call (the writes of a training step): the outputs
    are returned after them."""
    input_names, output_names = list(inputs), list(outputs)
    register_functions(graph_def)
    # Made eagerly, outside the trace: an eager Identity places each on the default device (a
    # GPU's, where there is one) without a copy on the CPU.
    captured = {f"{name}:0": tf.identity(value) for name, value in (held or {}).items()}
    present = {nd.name: nd for nd in graph_def.node}
    live = {n: h for n, h in (variables or {}).items() if n in present}

    def run(*args: Any) -> Any:
        input_map = dict(zip(input_names, args, strict=True))
        func_graph = tf.compat.v1.get_default_graph()
        input_map.update((name, func_graph.capture(t)) for name, t in captured.items())
        for name, handle in live.items():
            dtype = tf.as_dtype(present[name].attr["dtype"].type)
            if dtype == tf.resource:
                input_map[f"{name}:0"] = func_graph.capture(handle)
                continue
            read = tf.raw_ops.ReadVariableOp(resource=func_graph.capture(handle), dtype=dtype)
            input_map[f"{name}:0"] = read
        elements = tf.graph_util.import_graph_def(
            graph_def,
            input_map=input_map,
            return_elements=output_names + list(targets),
            name=IMPORT_SCOPE,
        )
        if not targets:
            return elements
        with tf.control_dependencies(elements[len(output_names) :]):
            return [tf.identity(t) for t in elements[: len(output_names)]]

    # The concrete function: calling it skips tf.function's dispatch (measured ~0.2 ms a call).
    return tf.function(run, input_signature=list(specs)).get_concrete_function()


def eager_constant(array: Any, dtype: str) -> Any:
    """An eager tensor holding `array`'s values, copied at most once (`tf.constant` copies a
    numpy array twice: 0.7 s more for BERT-base's weights). TensorFlow may share an aligned
    array's memory, so the array is made read-only (arrays in the IR are never written)."""
    tf_dtype = tf.as_dtype(dtype)
    array = np.asarray(array)
    if array.dtype == tf_dtype.as_numpy_dtype:
        array.flags.writeable = False
        try:
            ctx = context.context()
            ctx.ensure_initialized()
            return ops.EagerTensor(array, ctx.device_name, tf_dtype.as_datatype_enum)
        except (AttributeError, TypeError, ValueError):  # a TensorFlow whose class differs
            pass
    return tf.constant(array, tf_dtype)


def register_functions(graph_def: GraphDef) -> None:
    """Defines the functions of `graph_def`'s library (loop bodies, branches) in the eager
    context: a graph imported inside a tf.function calls them by name, and TensorFlow does not
    carry an imported library into the function it traces ("Function while_cond_4 is not
    defined" in a process that had not made them). A different function already defined under
    one of the names is an error, not silently used."""
    ctx = context.context()
    for fdef in graph_def.library.function:
        name = fdef.signature.name
        if not ctx.has_function(name):
            ctx.add_function_def(fdef)
            continue
        existing = ctx.get_function_def(name)
        if existing.signature != fdef.signature or len(existing.node_def) != len(fdef.node_def):
            raise ValueError(
                f"the graph's function {name!r} differs from the function of that name already "
                "defined in this process; rename one of them"
            )


class GraphFunction:
    """Calls a frozen graph with the original function's (args, kwargs) structure.

    `flat_fn` takes the flat list of input tensors and returns the flat list of outputs, which
    are packed back into the original function's output structure. `param_names` (the traced
    function's parameter names) lets tensor arguments be passed by keyword too.
    """

    def __init__(
        self,
        flat_fn: Any,
        structured_inputs: Any,
        structured_outputs: Any,
        param_names: Sequence[str] = (),
        input_specs: Sequence[tf.TensorSpec] = (),
    ) -> None:
        self.flat_fn = flat_fn
        self.input_specs = list(input_specs)
        self.structured_inputs = structured_inputs
        self.structured_outputs = structured_outputs
        self.param_names = list(param_names)

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], list[Any]]:
        """(values, specs) for every argument of the signature, in order."""
        sig_args, sig_kwargs = self.structured_inputs
        sig_kwargs = dict(sig_kwargs or {})
        if len(args) > len(sig_args):
            raise TypeError(
                f"expected at most {len(sig_args)} positional arguments, got {len(args)}"
            )
        kwargs = dict(kwargs)
        values = list(args)
        for i in range(len(args), len(sig_args)):
            name = self.param_names[i] if i < len(self.param_names) else None
            if name is not None and name in kwargs:
                values.append(kwargs.pop(name))
            elif _has_tensor(sig_args[i]):
                raise TypeError(f"missing tensor argument {name or i}")
            else:
                values.append(sig_args[i])  # a Python value the function was traced with
        specs = list(sig_args)
        for key, spec in sig_kwargs.items():
            if key in kwargs:
                values.append(kwargs.pop(key))
            elif _has_tensor(spec):
                raise TypeError(f"missing tensor argument {key!r}")
            else:
                values.append(spec)
            specs.append(spec)
        if kwargs:
            raise TypeError(f"unexpected keyword arguments {sorted(kwargs)}")
        return values, specs

    def flatten_inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        if self.structured_inputs is None:
            if kwargs:
                raise TypeError("this graph takes positional tensors only")
            return list(args)
        values, specs = self._bind(args, kwargs)
        tensors = []
        for value, spec in zip(values, specs, strict=True):
            try:
                # Up to the specs only: a list or array given for a TensorSpec is one value.
                flat_vals = nest.flatten_up_to(spec, value, expand_composites=True)
            except (TypeError, ValueError) as e:
                raise TypeError(f"arguments do not match the function's signature: {e}") from None
            flat_specs = tf.nest.flatten(spec, expand_composites=True)
            for s, v in zip(flat_specs, flat_vals, strict=True):
                if isinstance(s, tf.TensorSpec):
                    tensors.append(tf.convert_to_tensor(v, dtype=s.dtype))
        return tensors

    def _check_shapes(self, tensors: list[Any]) -> None:
        for i, (t, spec) in enumerate(zip(tensors, self.input_specs, strict=False)):
            if not spec.shape.is_compatible_with(t.shape):
                raise ValueError(f"input {i} has shape {t.shape}; the graph takes {spec.shape}")

    def _fast_path(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """True when the call is just the signature's tensors, in order (the common case):
        binding and flattening would only return `args` again."""
        if kwargs or self.structured_inputs is None:
            return False
        sig_args, sig_kwargs = self.structured_inputs
        if sig_kwargs or len(args) != len(sig_args):
            return False
        for arg, spec in zip(args, sig_args, strict=True):
            if not (
                isinstance(spec, tf.TensorSpec)
                and isinstance(arg, tf.Tensor)
                and arg.dtype == spec.dtype
            ):
                return False
        return True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tensors = list(args) if self._fast_path(args, kwargs) else self.flatten_inputs(args, kwargs)
        self._check_shapes(tensors)
        flat = self.flat_fn(*tensors)
        if self.structured_outputs is None:
            return flat
        return tf.nest.pack_sequence_as(self.structured_outputs, list(flat), expand_composites=True)


def _has_tensor(spec: Any) -> bool:
    return any(isinstance(s, tf.TensorSpec) for s in tf.nest.flatten(spec, expand_composites=True))
