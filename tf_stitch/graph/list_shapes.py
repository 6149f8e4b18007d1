"""The element shapes of the TensorLists a loop takes, for the shape inference of its body.

A loop's gradient (TensorFlow's while_v2) pops, at each step, the values its forward loop
pushed into TensorLists (its accumulators). Inside the gradient loop's body those lists are
`variant` arguments whose element shape TensorFlow's shape inference does not know, so every
popped value, and every op of the backward step after it, has an unknown rank: nothing there
can be planned (a Keras LSTM's training step: its backward loop body stayed TensorFlow's).

`list_element_shapes` finds what each list argument holds: the values the forward loop's body
pushes into the list it returns at that position (or the rows of a `TensorListFromTensor`, the
element shape of a `TensorListReserve`). `annotate_list_arguments` marks the body's arguments
with it, and graph/io.py's shape inference puts an `EmptyTensorList` of that element shape in
their place (only there: the graph itself is unchanged), so that TensorFlow's own shape
functions give what is popped or read from them that shape.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from tf_stitch.graph.ir import Graph, Node, Shape, TensorRef
from tf_stitch.graph.loop_constants import WHILE_OPS
from tf_stitch.graph.values import constant_value

BodyGraph = Callable[[Node], Graph | None]
ListElements = tuple[Shape, str]  # the elements' shape and dtype


def list_element_shapes(graph: Graph, loop: Node, body_graph: BodyGraph) -> dict[int, ListElements]:
    """The elements' shape and dtype of each TensorList input of `loop` that can be found, by
    input index. `body_graph(w)` is the IR of loop `w`'s body (None if it cannot be had)."""
    found: dict[int, ListElements] = {}
    for i, ref in enumerate(loop.inputs):
        if graph.info(ref).dtype != "variant":
            continue
        elements = _elements(graph, ref, body_graph)
        if elements is not None and elements[0] is not None:
            found[i] = elements
    return found


def _elements(graph: Graph, ref: TensorRef, body_graph: BodyGraph) -> ListElements | None:
    for _ in range(16):
        node = graph.node(ref.node)
        if node.op == "Identity" and node.inputs:
            ref = node.inputs[0]
            continue
        if node.op == "TensorListFromTensor" and node.inputs:
            rows = graph.info(node.inputs[0])
            shape = None if rows.shape is None or not rows.shape else tuple(rows.shape[1:])
            return shape, rows.dtype
        if node.op in ("TensorListReserve", "EmptyTensorList") and node.inputs:
            dtype = node.attrs.get("element_dtype")
            name = getattr(dtype, "name", None)
            return (_shape_value(graph, node.inputs[0]), name) if name else None
        if node.op in WHILE_OPS:
            body = body_graph(node)
            return None if body is None else _pushed(body, ref.index)
        return None
    return None


def _pushed(body: Graph, index: int) -> ListElements | None:
    """The values `body` pushes into the list it returns at `index`: their shape and dtype."""
    if index >= len(body.outputs):
        return None
    node = body.node(body.outputs[index].node)
    for _ in range(16):
        if node.op == "Identity" and node.inputs:
            node = body.node(node.inputs[0].node)
            continue
        if node.op in ("TensorListPushBack", "TensorListSetItem") and len(node.inputs) >= 2:
            value = body.info(node.inputs[-1])
            return value.shape, value.dtype
        return None
    return None


def _shape_value(graph: Graph, ref: TensorRef) -> Shape:
    value = constant_value(graph, ref)
    if value is None or value.ndim != 1:
        return None
    return tuple(None if int(d) < 0 else int(d) for d in value)


def annotate_list_arguments(
    graph_def: graph_pb2.GraphDef, args: Mapping[str, ListElements]
) -> None:
    """Marks the TensorList arguments (Placeholders) of `graph_def`, a function's body, with
    their elements' shape and dtype (`_element_shape`, `_element_dtype`), in place: graph/io.py
    gives shape inference an EmptyTensorList of that shape in their place."""
    for nd in graph_def.node:
        if nd.op != "Placeholder" or nd.name not in args:
            continue
        shape, dtype = args[nd.name]
        proto = tf.TensorShape(None if shape is None else list(shape)).as_proto()
        nd.attr["_element_shape"].shape.CopyFrom(proto)
        nd.attr["_element_dtype"].type = tf.as_dtype(dtype).as_datatype_enum
