"""A function body as TensorFlow instantiates it, turned into a graph the passes take, and back.

TensorFlow hands its graph optimization passes a function's body with `_Arg` nodes for the
arguments and `_Retval` nodes for the results; the variables it reads are resource arguments
read by `ReadVariableOp`. For the passes, each `_Arg` becomes a Placeholder of the same name,
each read of a resource argument a Placeholder of the variable's dtype and shape (so that the
passes know the weights' shapes), and the `_Retval`s the graph's outputs. The feeds are the
tensor arguments only: a variable's handle or value is a weight to the passes, as in
`optimize()`'s graphs (a bias add of one is left to TensorFlow's fused library call). The function's
control outputs (writes, reads that must happen) are the graph's targets. Colocation hints
(`_class`) are dropped: they name nodes the passes may fuse away, and a node that reads a
resource is placed with it anyway. `join` puts the
original nodes back under their names: arguments, reads (with their control inputs: a read
after a write stays after it) and results, so the variables stay live.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tensorflow as tf

from tf_stitch.graph.io import GraphDef

ARG_OPS = frozenset({"_Arg"})
RETVAL_OPS = frozenset({"_Retval"})
# Ops that only TensorFlow's own device placement may create: such a body is left alone.
COLOCATION = "_class"  # ["loc:@node", ...]: TensorFlow places the node with those
SHAPE_ATTR = "_shape"  # a read's value shape (graph/freeze.py's, read by graph/io.py)
# Ops a read's handle may come through. Not Enter: a read inside a loop lowered to frames keeps
# its unknown shape (given one, the passes would move work on it out of its frame).
PASS_THROUGH = frozenset({"Identity"})
DEVICE_OPS = frozenset({"_DeviceArg", "_DeviceRetval", "_Send", "_Recv", "_HostSend", "_HostRecv"})


class UnsupportedBody(ValueError):
    """A function body `split` cannot turn into a graph for the passes (says why)."""


@dataclass
class Body:
    """A function body for the passes: `graph_def` and the tensors and nodes to keep."""

    graph_def: GraphDef
    # The arguments that are tensors (not resource handles): the graph's feeds. The other
    # Placeholders stand for variables (a handle, a value read): weights to the passes.
    inputs: list[str]
    outputs: list[str]
    targets: list[str]
    # Placeholder name -> the node it stands for (an _Arg or a ReadVariableOp).
    originals: dict[str, tf.compat.v1.NodeDef] = field(default_factory=dict)
    handles: list[str] = field(default_factory=list)  # the resource arguments (variables)
    retvals: list[tf.compat.v1.NodeDef] = field(default_factory=list)


def split(graph_def: GraphDef, control_outputs: list[str]) -> Body:
    """`graph_def` (a function body) as a Body, or raises UnsupportedBody."""
    nodes = {n.name: n for n in graph_def.node}
    device_ops = sorted({n.op for n in graph_def.node if n.op in DEVICE_OPS})
    if device_ops:
        raise UnsupportedBody(f"it has {', '.join(device_ops)} nodes")
    missing = [name for name in control_outputs if name not in nodes]
    if missing:
        raise UnsupportedBody(f"its control output(s) {missing} are not in the graph")
    resources = {
        n.name
        for n in graph_def.node
        if n.op in ARG_OPS and n.attr["T"].type == tf.resource.as_datatype_enum
    }
    # Variables the function only reads: each read becomes a Placeholder of the value. A
    # variable it also writes (or gathers from, or passes on) keeps its ops on the handle, in
    # TensorFlow's order, for the passes (passes/forward_writes.py).
    only_read = resources - {
        _source(i) for n in graph_def.node if n.op != "ReadVariableOp" for i in n.input
    }
    out = GraphDef()
    out.CopyFrom(graph_def)
    del out.node[:]
    body = Body(out, [], [], list(control_outputs), handles=sorted(resources))
    retvals = []
    for node in graph_def.node:
        if node.op in RETVAL_OPS:
            if len(node.input) != 1 or node.input[0].startswith("^"):
                raise UnsupportedBody(f"result {node.name} has control inputs")
            retvals.append(node)
        elif node.op in ARG_OPS:
            body.originals[node.name] = node
            if node.name not in resources:
                body.inputs.append(f"{node.name}:0")
            out.node.append(_placeholder(node.name, node.attr["T"].type, _arg_shape(node)))
        elif node.op == "ReadVariableOp" and _source(node.input[0]) in only_read:
            arg = nodes[_source(node.input[0])]
            body.originals[node.name] = node
            shape = _handle_shape(arg)
            out.node.append(_placeholder(node.name, node.attr["dtype"].type, shape))
        else:
            copy = out.node.add()
            copy.CopyFrom(node)
            copy.attr.pop(COLOCATION, None)  # the passes may fuse away the node it names
            arg = _handle_arg(node, nodes, resources) if node.op == "ReadVariableOp" else None
            shape = _handle_shape(arg) if arg is not None else tf.TensorShape(None)
            if shape.rank is not None:
                # Its value's shape, which shape inference cannot know (graph/io.py reads it).
                copy.attr[SHAPE_ATTR].shape.CopyFrom(shape.as_proto())
    retvals.sort(key=lambda n: n.attr["index"].i)
    body.retvals = retvals
    body.outputs = [_tensor(n.input[0]) for n in retvals]
    return body


def join(optimized: GraphDef, body: Body) -> GraphDef:
    """The optimized graph of `body` as a function body again: the arguments, variable reads
    and results put back. Raises UnsupportedBody if a node they need is gone."""
    out = GraphDef()
    out.CopyFrom(optimized)
    del out.node[:]
    names = {n.name for n in optimized.node}
    # Every argument stays, even one the passes pruned (a variable's handle whose reads are
    # Placeholders of their own): the function's signature has it.
    for original in body.originals.values():
        if original.op in ARG_OPS and original.name not in names:
            out.node.add().CopyFrom(original)
            names.add(original.name)
    for node in optimized.node:
        original = body.originals.get(node.name)
        if original is None:
            out.node.add().CopyFrom(node)
            continue
        if node.op != "Placeholder":
            raise UnsupportedBody(f"the passes replaced argument {node.name}")
        restored = out.node.add()
        restored.CopyFrom(original)
        if COLOCATION in original.attr:
            kept = [c for c in original.attr[COLOCATION].list.s if c.decode()[5:] in names]
            del restored.attr[COLOCATION]
            if kept:
                restored.attr[COLOCATION].list.s.extend(kept)
    for original in body.originals.values():  # a read nothing needs any more may go
        gone = [i for i in original.input if _source(i) not in names]
        if original.name in names and gone:
            raise UnsupportedBody(f"the inputs {gone} of {original.name} are gone")
    for retval in body.retvals:
        if _source(retval.input[0]) not in names:
            raise UnsupportedBody(f"the tensor {retval.input[0]} of result {retval.name} is gone")
        out.node.add().CopyFrom(retval)
    return out


def _handle_arg(
    read: tf.compat.v1.NodeDef, nodes: dict[str, tf.compat.v1.NodeDef], resources: set[str]
) -> tf.compat.v1.NodeDef | None:
    """The resource argument a read's handle comes from (through Identity), if any."""
    name = _source(read.input[0]) if read.input else ""
    for _ in range(64):
        if name in resources:
            return nodes[name]
        node = nodes.get(name)
        if node is None or node.op not in PASS_THROUGH or not node.input:
            return None
        name = _source(node.input[0])
    return None


def _placeholder(name: str, dtype: int, shape: tf.TensorShape) -> tf.compat.v1.NodeDef:
    node = tf.compat.v1.NodeDef(name=name, op="Placeholder")
    node.attr["dtype"].type = dtype
    node.attr["shape"].shape.CopyFrom(shape.as_proto())
    return node


def _arg_shape(node: tf.compat.v1.NodeDef) -> tf.TensorShape:
    shapes = node.attr["_output_shapes"].list.shape
    return tf.TensorShape(shapes[0]) if len(shapes) == 1 else tf.TensorShape(None)


def _handle_shape(arg: tf.compat.v1.NodeDef) -> tf.TensorShape:
    shapes = arg.attr["_handle_shapes"].list.shape
    return tf.TensorShape(shapes[0]) if len(shapes) == 1 else tf.TensorShape(None)


def _source(name: str) -> str:
    return name.lstrip("^").split(":")[0]


def _tensor(name: str) -> str:
    return name if ":" in name else f"{name}:0"
