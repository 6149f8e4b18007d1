"""A typed view of a traced function's ops, without freezing it: names, op types, attributes
that describe layouts, and the dtypes and shapes of inputs and outputs. No weights are read;
it is what launch models need of the graph TensorFlow runs (e.g. `launches/gpu_launches.py`
applied to an unoptimized function)."""

from __future__ import annotations

from typing import Any

from tf_stitch.graph.ir import Graph, Node, TensorInfo, TensorRef

# The attributes kept: those that decide how many kernels an op launches.
# Attributes the GPU model reads: a convolution's layout, an Einsum's equation, a loop's
# functions (NameAttrLists, by `.name`).
KEPT_ATTRS = ("data_format", "equation", "body", "cond")


def graph_of_function(concrete: Any) -> Graph:
    """The ops of a ConcreteFunction's graph as IR nodes (the bodies of the functions it calls
    in its library, as protobuf), its outputs the function's."""
    graph = Graph()
    for op in concrete.graph.get_operations():
        attrs = {}
        for key in KEPT_ATTRS:
            try:
                attrs[key] = op.get_attr(key)
            except ValueError:
                continue
        graph.add(
            Node(
                op.name,
                op.type,
                [TensorRef(t.op.name, t.value_index) for t in op.inputs],
                attrs,
                [TensorInfo(t.dtype.name, _shape(t)) for t in op.outputs],
                [c.name for c in op.control_inputs],
            )
        )
    graph.outputs = [TensorRef(t.op.name, t.value_index) for t in concrete.outputs]
    graph.library = concrete.graph.as_graph_def().library.SerializeToString()
    return graph


def _shape(tensor: Any) -> tuple[int | None, ...] | None:
    dims = tensor.shape.as_list() if tensor.shape.rank is not None else None
    return None if dims is None else tuple(dims)
