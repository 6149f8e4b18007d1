"""A function body as TensorFlow instantiates it (_Arg, ReadVariableOp, _Retval) for the
passes, and back: the arguments, variable reads and results come back as they were."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tf_stitch.graph.function_bodies import UnsupportedBody, join, split
from tf_stitch.graph.io import GraphDef


def _node(
    name: str, op: str, inputs: tuple[str, ...] = (), **types: tf.DType
) -> tf.compat.v1.NodeDef:
    node = tf.compat.v1.NodeDef(name=name, op=op, input=list(inputs))
    for key, dtype in types.items():
        node.attr[key].type = dtype.as_datatype_enum
    return node


def _body() -> GraphDef:
    """x (an argument of shape [4]), v (a variable [4]) read after a write: y = x * v."""
    x = _node("x", "_Arg", T=tf.float32)
    x.attr["index"].i = 0
    x.attr["_output_shapes"].list.shape.add().CopyFrom(tf.TensorShape([4]).as_proto())
    v = _node("v", "_Arg", T=tf.resource)
    v.attr["index"].i = 1
    v.attr["_handle_shapes"].list.shape.add().CopyFrom(tf.TensorShape([4]).as_proto())
    write = _node("write", "AssignAddVariableOp", ("v", "x"), dtype=tf.float32)
    read = _node("read", "ReadVariableOp", ("v", "^write"), dtype=tf.float32)
    mul = _node("mul", "Mul", ("x", "read"), T=tf.float32)
    mul.attr["_class"].list.s.append(b"loc:@read")
    ret = _node("ret", "_Retval", ("mul",), T=tf.float32)
    ret.attr["index"].i = 0
    graph_def = GraphDef()
    graph_def.node.extend([x, v, write, read, mul, ret])
    return graph_def


def _read_only_body() -> GraphDef:
    """The body without its write: v is only read."""
    graph_def = GraphDef()
    for node in _body().node:
        if node.name != "write":
            graph_def.node.add().CopyFrom(node)
    del graph_def.node[2].input[1:]  # read's ^write
    return graph_def


def test_split_gives_placeholders_outputs_and_targets() -> None:
    body = split(_read_only_body(), [])
    ops = {n.name: n.op for n in body.graph_def.node}
    assert ops == {"x": "Placeholder", "v": "Placeholder", "read": "Placeholder", "mul": "Mul"}
    nodes = {n.name: n for n in body.graph_def.node}
    assert tf.TensorShape(nodes["read"].attr["shape"].shape) == [4]  # the variable's shape
    assert nodes["read"].attr["dtype"].type == tf.float32.as_datatype_enum
    assert nodes["v"].attr["dtype"].type == tf.resource.as_datatype_enum


def test_a_written_variable_keeps_its_reads_with_their_shape() -> None:
    body = split(_body(), ["write"])
    nodes = {n.name: n for n in body.graph_def.node}
    assert nodes["write"].op == "AssignAddVariableOp"
    assert nodes["read"].op == "ReadVariableOp"  # in order with the write (forward_writes)
    assert list(nodes["read"].input) == ["v", "^write"]
    assert tf.TensorShape(nodes["read"].attr["_shape"].shape) == [4]
    assert "_class" not in nodes["mul"].attr
    assert body.inputs == ["x:0"]  # v and its read are weights, not feeds
    assert body.outputs == ["mul:0"]
    assert split(_body(), ["write"]).targets == ["write"]


def _read_after_barrier() -> GraphDef:
    """The read-only body, its read after a NoOp `barrier` (a control input to keep)."""
    graph_def = _read_only_body()
    graph_def.node.insert(2, _node("barrier", "NoOp"))
    graph_def.node[3].input.append("^barrier")
    return graph_def


def test_join_puts_the_arguments_reads_and_results_back() -> None:
    original = _read_after_barrier()
    body = split(original, [])
    joined = join(body.graph_def, body)
    before = {n.name: n for n in original.node}
    after = {n.name: n for n in joined.node}
    assert set(after) == set(before)
    for name in ("x", "v", "read", "ret"):
        assert after[name] == before[name]
    assert list(after["read"].input) == ["v", "^barrier"]  # still after the barrier


def test_join_drops_colocation_with_nodes_that_are_gone() -> None:
    original = _read_only_body()
    read = next(n for n in original.node if n.name == "read")
    read.attr["_class"].list.s.extend([b"loc:@v", b"loc:@fused_away"])
    body = split(original, [])
    joined = {n.name: n for n in join(body.graph_def, body).node}
    assert list(joined["read"].attr["_class"].list.s) == [b"loc:@v"]


def test_join_refuses_a_graph_that_lost_what_the_body_needs() -> None:
    body = split(_read_after_barrier(), [])
    without_barrier = GraphDef()
    without_barrier.node.extend(n for n in body.graph_def.node if n.name != "barrier")
    with pytest.raises(UnsupportedBody, match=r"inputs.*barrier.*of read"):
        join(without_barrier, body)
    replaced = GraphDef()
    replaced.CopyFrom(body.graph_def)
    replaced.node[0].op = "Const"
    with pytest.raises(UnsupportedBody, match="replaced argument x"):
        join(replaced, body)


def test_split_refuses_device_ops_and_unknown_control_outputs() -> None:
    with pytest.raises(UnsupportedBody, match="control output"):
        split(_body(), ["nowhere"])
    with_device = _body()
    with_device.node.append(_node("d", "_DeviceArg", T=tf.float32))
    with pytest.raises(UnsupportedBody, match="_DeviceArg"):
        split(with_device, [])


def test_join_keeps_every_argument_and_drops_reads_nothing_needs() -> None:
    body = split(_read_only_body(), [])
    pruned = GraphDef()  # the passes pruned the handle v and the read
    pruned.node.extend(n for n in body.graph_def.node if n.name not in ("v", "read"))
    pruned.node[-1].input[1] = "x"  # mul = x * x
    joined = {n.name: n.op for n in join(pruned, body).node}
    assert joined["v"] == "_Arg" and "read" not in joined
