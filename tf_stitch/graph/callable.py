"""Turns an (optimized) GraphDef back into something callable from TensorFlow 2."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from tf_stitch.graph.io import GraphDef


def function_from_graph_def(
    graph_def: GraphDef, inputs: Sequence[str], outputs: Sequence[str], specs: Sequence[Any]
) -> Any:
    """A `tf.function` taking the `inputs` tensors (flat, in order, matching `specs`) and
    returning the `outputs` tensors of `graph_def` (imported once, when it is traced)."""
    input_names, output_names = list(inputs), list(outputs)

    def run(*args: Any) -> Any:
        return tf.graph_util.import_graph_def(
            graph_def,
            input_map=dict(zip(input_names, args, strict=True)),
            return_elements=output_names,
            name="stitched",
        )

    return tf.function(run, input_signature=list(specs), reduce_retracing=False)


class GraphFunction:
    """Calls a frozen graph with the original function's (args, kwargs) structure.

    `flat_fn` takes the flat list of input tensors and returns the flat list of outputs, which
    are packed back into the original function's output structure.
    """

    def __init__(self, flat_fn: Any, structured_inputs: Any, structured_outputs: Any) -> None:
        self.flat_fn = flat_fn
        self.structured_inputs = structured_inputs
        self.structured_outputs = structured_outputs

    def flatten_inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        if self.structured_inputs is None:
            if kwargs:
                raise TypeError("this graph takes positional tensors only")
            return list(args)
        sig_args, sig_kwargs = self.structured_inputs
        if len(args) != len(sig_args):
            raise TypeError(f"expected {len(sig_args)} positional arguments, got {len(args)}")
        try:
            tf.nest.assert_same_structure(tuple(args), tuple(sig_args))
        except (TypeError, ValueError) as e:
            raise TypeError(f"arguments do not match the function's signature: {e}") from None
        if set(kwargs) != set(sig_kwargs or {}):
            raise TypeError(f"expected keyword arguments {sorted(sig_kwargs or {})}, got {sorted(kwargs)}")
        flat_specs = tf.nest.flatten((sig_args, sig_kwargs), expand_composites=True)
        flat_vals = tf.nest.flatten((tuple(args), kwargs), expand_composites=True)
        tensors = []
        for spec, val in zip(flat_specs, flat_vals, strict=True):
            if isinstance(spec, tf.TensorSpec):
                tensors.append(tf.convert_to_tensor(val, dtype=spec.dtype))
        return tensors

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        flat = self.flat_fn(*self.flatten_inputs(args, kwargs))
        if self.structured_outputs is None:
            return flat
        return tf.nest.pack_sequence_as(self.structured_outputs, list(flat), expand_composites=True)
