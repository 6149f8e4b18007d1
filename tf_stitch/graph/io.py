"""GraphDef <-> IR. The only module that reads or writes graph protobufs.

Shapes and dtypes come from TensorFlow's own shape inference: the GraphDef is imported into a
fresh `tf.Graph` and every op's output tensors are read back.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from google.protobuf.message import DecodeError
from tensorflow.core.framework import attr_value_pb2, graph_pb2, node_def_pb2

from tf_stitch.graph.ir import (
    AttrList,
    DType,
    FuncRef,
    Graph,
    Node,
    RawAttr,
    Shape,
    ShapeValue,
    TensorInfo,
    TensorRef,
    TensorValue,
)

GraphDef = graph_pb2.GraphDef
_LIST_KINDS = ("s", "i", "f", "b", "type", "shape", "tensor", "func")
# Attributes that describe a previous shape inference and would go stale after a rewrite.
_DROPPED_ATTRS = ("_output_shapes",)


# -- parsing -----------------------------------------------------------------------------------
def parse_graph_def(data: Any) -> graph_pb2.GraphDef:
    """Accepts a GraphDef or its serialized bytes; anything else is a TypeError."""
    if isinstance(data, graph_pb2.GraphDef):
        return data
    if isinstance(data, bytes | bytearray | memoryview):
        gd = graph_pb2.GraphDef()
        try:
            gd.ParseFromString(bytes(data))
        except (DecodeError, RuntimeError, ValueError) as e:
            raise ValueError(f"not a valid serialized GraphDef ({len(data)} bytes): {e}") from None
        if len(data) and not gd.node:
            raise ValueError(f"not a valid serialized GraphDef: {len(data)} bytes held no nodes")
        return gd
    raise TypeError(f"expected a GraphDef or its serialized bytes, got {type(data).__name__}")


def graph_from_graph_def(
    data: Any,
    inputs: Sequence[str] | None = None,
    outputs: Sequence[str] | None = None,
    constants: Mapping[str, np.ndarray] | None = None,
    targets: Sequence[str] = (),
) -> Graph:
    """Builds the IR of a GraphDef with shapes from TensorFlow's shape inference.

    `inputs` default to the Placeholder nodes; `outputs` to every output of the nodes nobody
    consumes (nodes with no outputs become targets). `constants` are the values of
    Placeholders that stand for constants (weights frozen by reference): they become Consts.
    `targets` names nodes that must run besides the outputs (with `outputs` given).
    """
    gd = parse_graph_def(data)
    infos = _infer_shapes(_light_graph_def(gd))
    graph = Graph(library=gd.library.SerializeToString(), versions=gd.versions.SerializeToString())
    constants = constants or {}
    for nd in gd.node:
        node = _node_from_proto(nd)
        if nd.name in constants:
            node = _constant(node, constants[nd.name])
        node.outputs = infos[nd.name]
        graph.add(node)
    graph.inputs = (
        _resolve(graph, inputs, "input")
        if inputs is not None
        else [n.output(0) for n in graph if n.op == "Placeholder"]
    )
    if outputs is not None:
        graph.outputs = _resolve(graph, outputs, "output")
        missing = [t for t in targets if t not in graph]
        if missing:
            raise ValueError(f"unknown target(s) {missing}: the graph has no such node")
        graph.targets = list(targets)
    else:
        graph.outputs, graph.targets = _unconsumed(graph)
    return graph


def _constant(placeholder: Node, value: np.ndarray) -> Node:
    dtype = placeholder.attrs["dtype"]
    if placeholder.op != "Placeholder" or tf.as_dtype(value.dtype).name != dtype.name:
        raise ValueError(f"{placeholder.op} {placeholder.name!r} cannot hold a {value.dtype} value")
    attrs = {"dtype": dtype, "value": TensorValue(value, dtype.name)}
    return Node(
        placeholder.name, "Const", [], attrs, [], placeholder.control_inputs, placeholder.device
    )


def _resolve(graph: Graph, names: Sequence[str], what: str) -> list[TensorRef]:
    if isinstance(names, str):
        raise TypeError(f"{what}s must be a list of tensor names, not the string {names!r}")
    refs = []
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"{what} names must be strings, got {type(name).__name__}")
        ref = TensorRef.parse(name)
        if ref.node not in graph:
            raise ValueError(f"unknown {what} {name!r}: the graph has no node named {ref.node!r}")
        n_out = len(graph.node(ref.node).outputs)
        if ref.index >= n_out:
            raise ValueError(f"unknown {what} {name!r}: node {ref.node!r} has {n_out} output(s)")
        refs.append(ref)
    return refs


def _unconsumed(graph: Graph) -> tuple[list[TensorRef], list[str]]:
    used = {r.node for n in graph for r in n.inputs} | {c for n in graph for c in n.control_inputs}
    outputs: list[TensorRef] = []
    targets: list[str] = []
    for node in graph:
        if node.name in used or node.op == "Placeholder":
            continue
        if node.outputs:
            outputs.extend(node.output(i) for i in range(len(node.outputs)))
        else:
            targets.append(node.name)
    return outputs, targets


# Float constants at least this large are given to shape inference as Placeholders: their values
# never decide a shape, and serializing them would dominate the cost.
_LIGHT_CONST_ELEMENTS = 1024


def infer_shapes(graph: Graph) -> Graph:
    """A copy of `graph` with every TensorInfo recomputed by TensorFlow's shape inference."""
    gd = graph_pb2.GraphDef()
    if graph.versions:
        gd.versions.ParseFromString(graph.versions)
    if graph.library:
        gd.library.ParseFromString(graph.library)
    for node in graph:
        gd.node.append(_light_node(node))
    infos = _infer_shapes(_light_graph_def(gd))  # live reads and TensorLists stood in for
    out = graph.copy()
    for node in out:
        node.outputs = infos[node.name]
    return out


def _light_node(node: Node) -> node_def_pb2.NodeDef:
    value = node.attrs.get("value")
    if (
        node.op == "Const"
        and isinstance(value, TensorValue)
        and value.dtype in ("float32", "float16", "bfloat16", "float64")
        and np.size(value.array) >= _LIGHT_CONST_ELEMENTS
    ):
        return _const_as_placeholder(node)
    return node_to_proto(node)


def _placeholder(
    name: str, device: str, dtype: tf.DType, shape: Any, controls: list[str]
) -> node_def_pb2.NodeDef:
    """A Placeholder standing in for a large constant (in shape inference, or fed by reference)."""
    nd = node_def_pb2.NodeDef(name=name, op="Placeholder", device=device)
    nd.attr["dtype"].type = dtype.as_datatype_enum
    nd.attr["shape"].shape.CopyFrom(shape)
    nd.input.extend(controls)
    return nd


def _light_graph_def(gd: graph_pb2.GraphDef) -> graph_pb2.GraphDef:
    """`gd` for shape inference: its large float constants as Placeholders of their shape (a
    BERT-base's 440 MB of weights are not copied and imported again)."""
    light = graph_pb2.GraphDef()
    light.versions.CopyFrom(gd.versions)
    light.library.CopyFrom(gd.library)
    for nd in gd.node:
        if nd.op == "Placeholder" and "_element_shape" in nd.attr:
            light.node.extend(_list_stand_in(nd))
        else:
            light.node.append(_light_proto(nd) or nd)
    return light


def _list_stand_in(nd: node_def_pb2.NodeDef) -> list[node_def_pb2.NodeDef]:
    """A TensorList argument whose elements' shape tf_stitch knows (graph/list_shapes.py), for
    shape inference: an EmptyTensorList of that element shape (TensorFlow's shape inference
    gives the values popped from it that shape), and the constants it reads."""
    dims = [d.size for d in nd.attr["_element_shape"].shape.dim]
    shape = node_def_pb2.NodeDef(name=f"{nd.name}/element_shape_ts", op="Const", device=nd.device)
    shape.attr["dtype"].type = tf.int32.as_datatype_enum
    shape.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.asarray(dims, np.int32)))
    count = node_def_pb2.NodeDef(name=f"{nd.name}/max_elements_ts", op="Const", device=nd.device)
    count.attr["dtype"].type = tf.int32.as_datatype_enum
    count.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.int32(-1)))
    stand_in = node_def_pb2.NodeDef(
        name=nd.name, op="EmptyTensorList", input=[shape.name, count.name], device=nd.device
    )
    stand_in.attr["element_dtype"].CopyFrom(nd.attr["_element_dtype"])
    stand_in.attr["shape_type"].type = tf.int32.as_datatype_enum
    return [shape, count, stand_in]


def _light_proto(nd: node_def_pb2.NodeDef) -> node_def_pb2.NodeDef | None:
    if nd.op == "ReadVariableOp" and "_shape" in nd.attr:
        # a live variable's read, its value's shape known to tf_stitch (graph/freeze.py), not
        # to TensorFlow's shape inference: a Placeholder of that shape stands in for it
        controls = [i for i in nd.input if i.startswith("^")]
        dtype = tf.as_dtype(nd.attr["dtype"].type)
        return _placeholder(nd.name, nd.device, dtype, nd.attr["_shape"].shape, controls)
    if nd.op != "Const" or "value" not in nd.attr:
        return None
    tensor = nd.attr["value"].tensor
    dtype = tf.as_dtype(tensor.dtype)
    if not dtype.is_floating:
        return None
    if int(np.prod([d.size for d in tensor.tensor_shape.dim])) < _LIGHT_CONST_ELEMENTS:
        return None
    controls = [i for i in nd.input if i.startswith("^")]
    return _placeholder(nd.name, nd.device, dtype, tensor.tensor_shape, controls)


def _infer_shapes(gd: graph_pb2.GraphDef) -> dict[str, list[TensorInfo]]:
    with tf.Graph().as_default() as g:
        try:
            tf.graph_util.import_graph_def(gd, name="")
        except (ValueError, TypeError, tf.errors.OpError) as e:
            raise ValueError(f"TensorFlow cannot import this GraphDef: {e}") from None
        return {
            op.name: [TensorInfo(t.dtype.base_dtype.name, _shape(t.shape)) for t in op.outputs]
            for op in g.get_operations()
        }


def _shape(shape: tf.TensorShape) -> Shape:
    if shape.rank is None:
        return None
    return tuple(shape.as_list())


# -- nodes and attributes -------------------------------------------------------------------------
def _node_from_proto(nd: node_def_pb2.NodeDef) -> Node:
    inputs, controls = [], []
    for name in nd.input:
        if name.startswith("^"):
            controls.append(name[1:])
        else:
            inputs.append(TensorRef.parse(name))
    attrs = {k: attr_from_proto(v) for k, v in nd.attr.items() if k not in _DROPPED_ATTRS}
    return Node(nd.name, nd.op, inputs, attrs, [], controls, nd.device)


def node_to_proto(node: Node) -> node_def_pb2.NodeDef:
    nd = node_def_pb2.NodeDef(name=node.name, op=node.op, device=node.device)
    for ref in node.inputs:
        nd.input.append(ref.node if ref.index == 0 else str(ref))
    nd.input.extend("^" + c for c in node.control_inputs)
    for key, value in node.attrs.items():
        nd.attr[key].CopyFrom(attr_to_proto(value))
    return nd


def graph_to_graph_def(graph: Graph, as_placeholders: Collection[str] = ()) -> graph_pb2.GraphDef:
    """Writes the IR back as a GraphDef that TensorFlow imports. The constants named in
    `as_placeholders` are written as Placeholders of their dtype and shape, for a caller that
    feeds their values (graph/held_constants.py)."""
    gd = graph_pb2.GraphDef()
    if graph.versions:
        gd.versions.ParseFromString(graph.versions)
    if graph.library:
        gd.library.ParseFromString(graph.library)
    held = set(as_placeholders)
    gd.node.extend(_const_as_placeholder(n) if n.name in held else node_to_proto(n) for n in graph)
    return gd


def _const_as_placeholder(node: Node) -> node_def_pb2.NodeDef:
    """A Placeholder of a constant's dtype and shape, in its place."""
    value = node.attrs["value"]
    if node.op != "Const" or not isinstance(value, TensorValue):
        raise ValueError(f"only a constant can be fed by reference, not {node.op} {node.name!r}")
    shape = tf.TensorShape(np.shape(value.array)).as_proto()
    controls = ["^" + c for c in node.control_inputs]
    return _placeholder(node.name, node.device, tf.as_dtype(value.dtype), shape, controls)


def attr_from_proto(v: attr_value_pb2.AttrValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "s":
        return v.s
    if kind == "i":
        return int(v.i)
    if kind == "f":
        return float(v.f)
    if kind == "b":
        return bool(v.b)
    if kind == "type":
        return DType(tf.as_dtype(v.type).name)
    if kind == "shape":
        return ShapeValue(_shape(tf.TensorShape(v.shape)))
    if kind == "tensor":
        try:
            return TensorValue(_ndarray(v.tensor), tf.as_dtype(v.tensor.dtype).name)
        except (TypeError, ValueError, NotImplementedError):
            return RawAttr(v.SerializeToString())
    if kind == "func":
        return FuncRef(v.func.name, {k: attr_from_proto(a) for k, a in v.func.attr.items()})
    if kind == "list":
        lst = v.list
        for lk in _LIST_KINDS:
            items = getattr(lst, lk)
            if len(items):
                return AttrList(lk, tuple(_list_item(lk, x) for x in items))
        return AttrList("", ())
    return RawAttr(v.SerializeToString())


def _ndarray(tensor: Any) -> np.ndarray:
    """The tensor's value. A weight's bytes are read once, into an array that cannot be
    written (values in the IR are never changed in place); `tf.make_ndarray` copies them twice."""
    dtype = tf.as_dtype(tensor.dtype)
    if tensor.tensor_content and dtype.is_numpy_compatible and dtype != tf.string:
        shape = [d.size for d in tensor.tensor_shape.dim]
        return np.frombuffer(tensor.tensor_content, dtype=dtype.as_numpy_dtype).reshape(shape)
    return tf.make_ndarray(tensor)


def _list_item(kind: str, x: Any) -> Any:
    if kind == "type":
        return DType(tf.as_dtype(x).name)
    if kind == "shape":
        return ShapeValue(_shape(tf.TensorShape(x)))
    if kind == "tensor":
        return TensorValue(tf.make_ndarray(x), tf.as_dtype(x.dtype).name)
    if kind == "func":
        return FuncRef(x.name, {k: attr_from_proto(a) for k, a in x.attr.items()})
    return x


def attr_to_proto(value: Any) -> attr_value_pb2.AttrValue:
    v = attr_value_pb2.AttrValue()
    if isinstance(value, RawAttr):
        v.ParseFromString(value.data)
    elif isinstance(value, bool):
        v.b = value
    elif isinstance(value, int):
        v.i = value
    elif isinstance(value, float):
        v.f = value
    elif isinstance(value, bytes):
        v.s = value
    elif isinstance(value, str):
        v.s = value.encode()
    elif isinstance(value, DType):
        v.type = tf.as_dtype(value.name).as_datatype_enum
    elif isinstance(value, ShapeValue):
        v.shape.CopyFrom(tf.TensorShape(value.dims).as_proto())
    elif isinstance(value, TensorValue):
        v.tensor.CopyFrom(tensor_proto(value))
    elif isinstance(value, FuncRef):
        v.func.name = value.name
        for k, a in value.attrs.items():
            v.func.attr[k].CopyFrom(attr_to_proto(a))
    elif isinstance(value, AttrList):
        v.list.SetInParent()  # an empty list is still a list
        _fill_list(v.list, value)
    else:
        raise TypeError(f"cannot write attribute value of type {type(value).__name__}")
    return v


def _fill_list(lst: attr_value_pb2.AttrValue.ListValue, value: AttrList) -> None:
    for item in value.items:
        if value.kind == "type":
            lst.type.append(tf.as_dtype(item.name).as_datatype_enum)
        elif value.kind == "shape":
            lst.shape.add().CopyFrom(tf.TensorShape(item.dims).as_proto())
        elif value.kind == "tensor":
            lst.tensor.add().CopyFrom(tensor_proto(item))
        elif value.kind == "func":
            lst.func.add().CopyFrom(attr_to_proto(item).func)
        elif value.kind == "s":
            lst.s.append(item if isinstance(item, bytes) else str(item).encode())
        else:
            getattr(lst, value.kind).append(item)


def tensor_proto(value: TensorValue) -> Any:
    arr = np.asarray(value.array)
    return tf.make_tensor_proto(arr, dtype=tf.as_dtype(value.dtype), shape=arr.shape)
