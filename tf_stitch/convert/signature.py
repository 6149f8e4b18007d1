"""One signature of a SavedModel: frozen, stitched, made self-contained, and rebuilt as a
ConcreteFunction with the original's input names and structured outputs."""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass, field
from typing import Any

import tensorflow as tf
from tensorflow.core.framework import graph_pb2
from tensorflow.python.eager import wrap_function

from tf_stitch.convert.embed import Embedded, embed_binaries
from tf_stitch.graph.freeze import freeze
from tf_stitch.graph.io import graph_from_graph_def, graph_to_graph_def
from tf_stitch.optimize import optimize_graph
from tf_stitch.passes.base import PassContext

# Ops that launch no kernel: left out of "ops" in the summary's counts.
_NO_WORK = frozenset({"Const", "Identity", "NoOp", "Placeholder", "PlaceholderWithDefault"})


@dataclass
class ConvertedSignature:
    """The conversion of one signature and what was measured of it."""

    key: str
    original: Any  # the loaded signature's ConcreteFunction
    graph_def: graph_pb2.GraphDef  # stitched, with binaries and fallbacks
    context: PassContext
    input_names: list[str]  # the signature's input names, in the function's flat order
    specs: dict[str, tf.TensorSpec]  # by input name, with the shapes converted for
    function: Any  # the converted ConcreteFunction
    ops_before: int
    ops_after: int
    embedded: list[Embedded]
    launches: tuple[int, int] | None = None  # kernels per step before/after, when measured
    shapes_seen: list[dict[str, tuple[int, ...]]] = field(default_factory=list)
    max_abs_diff: float | None = None  # over build()'s batches
    same_as: str | None = None  # the signature whose conversion this one shares


def fingerprint(concrete: Any) -> bytes:
    """What two signatures share when they are the same computation (as Keras' `serve` and
    `serving_default` are): inputs, outputs, the objects they capture (the variables) and
    the nodes of their wrapper graphs, which name the functions they call (names unique within
    a loaded SavedModel). A placeholder's `_user_specified_name` (its capture's number) is
    left out."""
    digest = hashlib.sha256(
        repr((concrete.structured_input_signature, concrete.structured_outputs)).encode()
    )
    digest.update(repr([id(t) for t in concrete.captured_inputs]).encode())
    for node in concrete.graph.as_graph_def().node:
        if node.op == "Placeholder":
            node.attr.pop("_user_specified_name", None)
        digest.update(node.SerializeToString(deterministic=True))
    return digest.digest()


def input_specs(concrete: Any) -> dict[str, tf.TensorSpec]:
    """A signature's inputs by name, in its flat (sorted) order."""
    _, kwargs = concrete.structured_input_signature
    return {name: kwargs[name] for name in sorted(kwargs)}


def convert_signature(
    key: str, concrete: Any, shapes: dict[str, tf.TensorShape], cuda: bool
) -> ConvertedSignature:
    """Freezes, stitches and embeds one signature (`shapes` refine its inputs' shapes)."""
    specs = input_specs(concrete)
    names = list(specs)
    frozen = freeze(concrete)  # loops stay functional (and lowered when run)
    gd, placeholders = frozen.graph_def, frozen.inputs
    if len(placeholders) != len(names):
        raise ValueError(
            f"signature {key!r}: {len(placeholders)} frozen inputs for {len(names)} named inputs"
        )
    specs = {n: _refined(specs[n], shapes.get(n)) for n in names}
    _set_placeholder_shapes(gd, placeholders, [specs[n].shape for n in names])
    outputs = frozen.outputs
    graph = graph_from_graph_def(gd, placeholders, outputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # they are in ctx.warnings
        stitched, ctx = optimize_graph(graph, None, cuda=cuda, fallback=True)
    optimized = graph_to_graph_def(stitched)
    embedded = embed_binaries(optimized)
    function = rebuild(concrete, optimized, placeholders, outputs, specs)
    return ConvertedSignature(
        key=key,
        original=concrete,
        graph_def=optimized,
        context=ctx,
        input_names=names,
        specs=specs,
        function=function,
        ops_before=_count_ops(gd),
        ops_after=_count_ops(optimized),
        embedded=embedded,
    )


def _refined(spec: tf.TensorSpec, shape: tf.TensorShape | None) -> tf.TensorSpec:
    if shape is None:
        return spec
    return tf.TensorSpec(spec.shape.merge_with(shape), spec.dtype, spec.name)


def _set_placeholder_shapes(
    gd: graph_pb2.GraphDef, placeholders: list[str], shapes: list[tf.TensorShape]
) -> None:
    by_name = {n.name: n for n in gd.node}
    for tensor, shape in zip(placeholders, shapes, strict=True):
        node = by_name[tensor.rsplit(":", 1)[0]]
        node.attr["shape"].shape.CopyFrom(shape.as_proto())


def rebuild(
    original: Any,
    graph_def: graph_pb2.GraphDef,
    inputs: list[str],
    outputs: list[str],
    specs: dict[str, tf.TensorSpec],
) -> Any:
    """A ConcreteFunction running `graph_def` that is called, and saved as a signature, like
    `original`: the same input names (with `specs`' shapes) and structured outputs. (TF-TRT
    rebuilds its converted signatures the same way.)"""
    # Unlike TF-TRT, no function is removed from the eager context first: the graph's library
    # holds the original's functions unchanged and fallbacks named by their content, so a
    # name already registered has this very definition.
    function = wrap_function.function_from_graph_def(graph_def, inputs, outputs)
    function.graph.structured_outputs = tf.nest.pack_sequence_as(
        original.graph.structured_outputs, function.graph.structured_outputs
    )
    function.graph.structured_input_signature = ((), dict(specs))
    function._function_type = original.function_type  # as TF-TRT does
    return function


def _count_ops(gd: graph_pb2.GraphDef) -> int:
    return sum(1 for n in gd.node if n.op not in _NO_WORK)
