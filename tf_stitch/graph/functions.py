"""Library functions as IR graphs and back: a loop's body or a branch, optimized like the main
graph, then called under a new name."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import tensorflow as tf
from tensorflow.core.framework import function_pb2
from tensorflow.python.framework import function_def_to_graph, graph_to_function_def

from tf_stitch.graph.io import graph_from_graph_def, graph_to_graph_def
from tf_stitch.graph.ir import FuncRef, Graph, Node, Shape
from tf_stitch.graph.list_shapes import ListElements, annotate_list_arguments


def function_uses(graph: Graph) -> Counter[str]:
    """How many references each library function has, from the main graph's nodes and from
    every function's."""
    library = _library(graph.library)
    uses: Counter[str] = Counter()
    for node in graph:
        uses.update(_refs(node.attrs.values()))
    for fdef in library.function:
        for nd in fdef.node_def:
            for value in nd.attr.values():
                if value.HasField("func"):
                    uses[value.func.name] += 1
                uses.update(f.name for f in value.list.func)
    return uses


def _refs(values: Iterable[Any]) -> list[str]:
    return [v.name for v in values if isinstance(v, FuncRef)]


def function_graph(
    library: bytes,
    name: str,
    input_shapes: Sequence[Shape],
    list_shapes: Mapping[int, ListElements] | None = None,
) -> Graph:
    """The body of library function `name` as IR: its arguments Placeholders with
    `input_shapes`, its return values the outputs, the library the same. `list_shapes` gives
    the elements' shape and dtype of TensorList arguments, by index (graph/list_shapes.py)."""
    lib = _library(library)
    fdef = next((f for f in lib.function if f.signature.name == name), None)
    if fdef is None:
        raise ValueError(f"no function {name!r} in the graph's library")
    shapes = [tf.TensorShape(None if s is None else list(s)) for s in input_shapes]
    graph_def, flat = function_def_to_graph.function_def_to_graph_def(fdef, input_shapes=shapes)
    if list_shapes:
        arguments = fdef.signature.input_arg
        annotate_list_arguments(graph_def, {arguments[i].name: e for i, e in list_shapes.items()})
    graph_def.library.CopyFrom(lib)
    outputs = [flat.get(fdef.ret[a.name], fdef.ret[a.name]) for a in fdef.signature.output_arg]
    inputs = [a.name for a in fdef.signature.input_arg]
    return graph_from_graph_def(graph_def, inputs=inputs, outputs=outputs)


def with_function(library: bytes, graph: Graph, base: str, replaces: str = "") -> tuple[bytes, str]:
    """`library` with `graph` (inputs: its Placeholders in order; outputs in order) added as a
    function named after `base` and its contents, the function `replaces` (if any) removed,
    and every function of `graph`'s library it lacks added; and the new function's name."""
    with tf.Graph().as_default() as g:
        tf.graph_util.import_graph_def(graph_to_graph_def(graph), name="")
    args = {r.node for r in graph.inputs}
    fdef = graph_to_function_def.graph_to_function_def(
        g,
        [op for op in g.get_operations() if op.name not in args],
        [g.get_tensor_by_name(str(r)) for r in graph.inputs],
        [g.get_tensor_by_name(str(r)) for r in graph.outputs],
    )
    digest = hashlib.sha256(fdef.SerializeToString(deterministic=True)).hexdigest()[:10]
    fdef.signature.name = f"{base.split('_ts')[0]}_ts{digest}"
    lib = _library(library)
    kept = [f for f in lib.function if f.signature.name != replaces]
    del lib.function[:]
    lib.function.extend(kept)
    present = {f.signature.name for f in lib.function}
    for f in [*_library(graph.library).function, fdef]:
        if f.signature.name not in present and f.signature.name != replaces:
            lib.function.add().CopyFrom(f)
            present.add(f.signature.name)
    return lib.SerializeToString(), fdef.signature.name


def _library(data: bytes) -> function_pb2.FunctionDefLibrary:
    lib = function_pb2.FunctionDefLibrary()
    lib.ParseFromString(data)
    return lib


def original_bodies(
    graph: Graph, bodies: dict[str, Graph | None] | None = None
) -> Callable[[Node], Graph | None]:
    """`body(loop)`: the IR of a While node's body as `graph`'s library has it (None where it
    cannot be converted), each converted once, into `bodies` (by loop name), where a caller
    may put a better one first."""
    bodies = {} if bodies is None else bodies

    def body(loop: Node) -> Graph | None:
        if loop.name not in bodies:
            try:
                shapes = [o.shape for o in loop.outputs]
                bodies[loop.name] = function_graph(graph.library, loop.attrs["body"].name, shapes)
            except (ValueError, TypeError, KeyError, tf.errors.OpError):
                bodies[loop.name] = None
        return bodies[loop.name]

    return body
