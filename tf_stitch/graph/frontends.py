"""Everything that can be optimized, turned into one `Graph` plus its call signature.

Accepted: a GraphDef (or its bytes), a `ConcreteFunction`, a `tf.function` (with an input
signature, given here or declared on it) and a Keras model. A function's variables stay live by
default: each is a Placeholder for its value in the graph (`Frontend.variables`), read when the
optimized function runs, so `assign`, `set_weights` and optimizer updates are seen. With
`freeze=True` they are frozen into constants, as TF-TRT does: later changes are not seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import tensorflow as tf

from tf_stitch.graph.freeze import freeze as freeze_function
from tf_stitch.graph.io import graph_from_graph_def, parse_graph_def
from tf_stitch.graph.ir import Graph

ACCEPTED = (
    "a GraphDef (or its serialized bytes), a tf.function, a ConcreteFunction or a Keras model"
)


@dataclass
class Frontend:
    """A frozen graph and how to call it like the original."""

    graph: Graph
    kind: str  # "graph_def" | "concrete_function"
    structured_inputs: Any = None  # (args, kwargs) of TensorSpecs
    structured_outputs: Any = None
    # Live variables: Placeholder node name -> the variable's resource handle.
    variables: dict[str, Any] = field(default_factory=dict)


def is_keras_model(obj: Any) -> bool:
    try:
        import keras
    except ImportError:  # pragma: no cover - keras ships with TensorFlow 2.21
        return False
    return isinstance(obj, keras.Model)


def load(
    obj: Any,
    *,
    inputs: Sequence[str] | None = None,
    outputs: Sequence[str] | None = None,
    input_signature: Sequence[tf.TensorSpec] | None = None,
    freeze: bool = False,
) -> Frontend:
    """`obj` as a Frontend, its variables frozen if `freeze`, or raises TypeError/ValueError
    saying what is wrong (`VariableWriteError` for a function that writes variables, unless
    frozen)."""
    if isinstance(obj, bytes | bytearray | memoryview) or type(obj).__name__ == "GraphDef":
        if input_signature is not None:
            raise TypeError("input_signature applies to functions and Keras models, not GraphDefs")
        graph_def = parse_graph_def(obj)
        if not graph_def.node:
            raise ValueError("the GraphDef is empty: it has no nodes")
        return Frontend(graph_from_graph_def(graph_def, inputs, outputs), "graph_def")
    if inputs is not None or outputs is not None:
        raise TypeError("inputs=/outputs= name tensors of a GraphDef; functions have signatures")
    return from_concrete_function(concrete_function_of(obj, input_signature), freeze)


def concrete_function_of(obj: Any, input_signature: Sequence[tf.TensorSpec] | None) -> Any:
    """The ConcreteFunction to freeze for a tf.function, ConcreteFunction or Keras model."""
    from tensorflow.python.eager.polymorphic_function.concrete_function import ConcreteFunction

    if isinstance(obj, ConcreteFunction):
        if input_signature is not None:
            raise TypeError("a ConcreteFunction already has its signature; drop input_signature")
        return obj
    if is_keras_model(obj):
        return _keras_concrete_function(obj, input_signature)
    if hasattr(obj, "get_concrete_function"):
        try:
            if input_signature is not None:
                return obj.get_concrete_function(*input_signature)
            return obj.get_concrete_function()
        except (TypeError, ValueError) as e:
            name = getattr(obj, "__name__", obj)
            if input_signature is not None or getattr(obj, "input_signature", None) is not None:
                raise ValueError(f"tracing {name!r} failed: {e}") from e  # the function's fault
            raise TypeError(
                f"cannot trace {name!r} without an input signature "
                f"(pass input_signature=[tf.TensorSpec(...), ...]): {e}"
            ) from None
    raise TypeError(f"tf_stitch expects {ACCEPTED}; got {type(obj).__name__}")


def _keras_concrete_function(model: Any, input_signature: Sequence[tf.TensorSpec] | None) -> Any:
    if input_signature is None:
        try:
            specs = [tf.TensorSpec(t.shape, t.dtype) for t in model.inputs]
        except (AttributeError, ValueError):
            raise TypeError(
                "this Keras model has no known inputs (it is subclassed, or was never built); pass "
                "input_signature=[tf.TensorSpec(...)]"
            ) from None
    else:
        specs = list(input_signature)

    # Called as the model is: one tensor, or one list of tensors for several inputs.
    def call(inputs: Any) -> Any:
        return model(inputs, training=False)

    return tf.function(call).get_concrete_function(specs[0] if len(specs) == 1 else specs)


def from_concrete_function(cf: Any, freeze: bool = False) -> Frontend:
    # Loops and conditionals stay functional ops (While, If) whose bodies are TensorFlow's:
    # lowered, a loop's back edge would be a cycle in the graph, and a kernel must not span
    # iterations or branches. TensorFlow lowers them itself when it runs the graph.
    frozen = freeze_function(cf, hold=True, live=not freeze)
    graph = graph_from_graph_def(
        frozen.graph_def, frozen.inputs, frozen.outputs, frozen.held, frozen.targets
    )
    return Frontend(
        graph,
        "concrete_function",
        cf.structured_input_signature,
        cf.structured_outputs,
        frozen.live,
    )
