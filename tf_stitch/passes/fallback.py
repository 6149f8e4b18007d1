"""The fallback of a StitchedKernel: its group's original TensorFlow ops as a function.

A converted SavedModel may be run where a kernel cannot be loaded (its binary does not fit the
CPU and there is no compiler); the op then runs this function instead (`fallback` attr), as
TF-TRT's engine op keeps its segment as `segment_func`. The function takes the kernel's inputs
in order and returns its outputs in order; it holds every node between them (the group's
members and the constants they read), with the control edges among them; edges from outside
stay on the StitchedKernel node.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import tensorflow as tf
from tensorflow.core.framework import function_pb2

from tf_stitch.graph.callable import function_from_graph_def
from tf_stitch.graph.io import graph_to_graph_def
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef

_FEEDS = ("Placeholder", "PlaceholderWithDefault")


def fallback_function(
    graph: Graph, inputs: Sequence[TensorRef], outputs: Sequence[TensorRef], node_name: str
) -> function_pb2.FunctionDef:
    """The FunctionDef computing `outputs` from `inputs` with `graph`'s own ops.

    Its name is `tf_stitch_fallback_<node>_<digest of the body>`, so that functions of
    different graphs saved together never collide. Raises ValueError if the outputs depend on
    a feed that is not among `inputs`.
    """
    feeds = {ref: i for i, ref in enumerate(inputs)}
    needed = _between(graph, feeds, outputs)
    sub = Graph(library=graph.library, versions=graph.versions)
    arg_names = []
    for i, ref in enumerate(inputs):
        name = _fresh(f"fallback_arg_{i}", needed, sub)
        info = graph.info(ref)
        sub.add(
            Node(
                name,
                "Placeholder",
                attrs={"dtype": DType(info.dtype)},
                outputs=[TensorInfo(info.dtype, info.shape)],
            )
        )
        arg_names.append(name)
    for node in needed.values():
        copy = node.copy()
        copy.inputs = [TensorRef(arg_names[feeds[r]], 0) if r in feeds else r for r in node.inputs]
        copy.control_inputs = [c for c in node.control_inputs if c in needed]
        copy.device = ""
        sub.add(copy)
    specs = [tf.TensorSpec(graph.info(r).shape, tf.as_dtype(graph.info(r).dtype)) for r in inputs]
    fetches = [f"{arg_names[feeds[r]]}:0" if r in feeds else str(r) for r in outputs]
    concrete = function_from_graph_def(
        graph_to_graph_def(sub), [f"{n}:0" for n in arg_names], fetches, specs
    )
    fdef = function_pb2.FunctionDef()
    fdef.CopyFrom(concrete.function_def)
    fdef.signature.name = ""
    digest = hashlib.sha256(fdef.SerializeToString(deterministic=True)).hexdigest()[:16]
    safe = "".join(c if c.isalnum() else "_" for c in node_name)
    fdef.signature.name = f"tf_stitch_fallback_{safe}_{digest}"
    return fdef


def _between(
    graph: Graph, feeds: dict[TensorRef, int], outputs: Sequence[TensorRef]
) -> dict[str, Node]:
    """The nodes that compute `outputs` from `feeds`, in topological order."""
    seen: set[str] = set()
    stack = [r.node for r in outputs if r not in feeds]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        node = graph.node(name)
        if node.op in _FEEDS:
            raise ValueError(f"the kernel's outputs depend on the feed {name!r}, not an input")
        seen.add(name)
        stack.extend(r.node for r in node.inputs if r not in feeds)
    return {n.name: n for n in graph.topological_order() if n.name in seen}


def _fresh(base: str, taken: dict[str, Node], graph: Graph) -> str:
    name, k = base, 0
    while name in taken or name in graph:
        k += 1
        name = f"{base}_{k}"
    return name


def add_functions(library: bytes, functions: Iterable[function_pb2.FunctionDef]) -> bytes:
    """`library` (a serialized FunctionDefLibrary) with `functions` added (once each)."""
    lib = function_pb2.FunctionDefLibrary()
    lib.ParseFromString(library)
    present = {f.signature.name for f in lib.function}
    for f in functions:
        if f.signature.name not in present:
            lib.function.add().CopyFrom(f)
            present.add(f.signature.name)
    return lib.SerializeToString()
