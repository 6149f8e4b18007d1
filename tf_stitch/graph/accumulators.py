"""The accumulators between a forward loop and its gradient loop, found and edited.

The gradient of a While loop (TensorFlow's while_v2) saves, at every trip of the forward loop,
each forward value its backward step reads: the forward body pushes it into a TensorList (an
accumulator) that it returns at the same position, the list leaves the forward loop and enters
the gradient loop, whose body pops one value a trip. `accumulators` finds the lists that are
exactly that (passes/dead_accumulators.py and passes/invariant_accumulators.py rewrite them);
the helpers edit the loops' FunctionDefs in place of a round trip through the IR, which would
run shape inference over bodies already stitched.

A FunctionDef names a value `node:output:i`, or an argument by its name; its returns are `ret`.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2, function_pb2
from tensorflow.core.framework.function_pb2 import FunctionDef
from tensorflow.core.framework.node_def_pb2 import NodeDef

from tf_stitch.graph.functions import function_uses
from tf_stitch.graph.ir import FuncRef, Graph, Node, TensorRef
from tf_stitch.graph.loop_constants import WHILE_OPS

PUSH, POP = "TensorListPushBack", "TensorListPopBack"


@dataclass(frozen=True)
class Accumulator:
    forward: str  # the forward While node
    index: int  # the list's position among its loop variables
    backward: str  # the gradient While node
    backward_index: int
    push: str  # the push node in the forward body
    pop: str  # the pop node in the gradient body
    popped_read: bool  # whether the gradient body reads what it pops


class Library:
    """A graph's function library, parsed once, and how many references each function has."""

    def __init__(self, graph: Graph) -> None:
        self.proto = function_pb2.FunctionDefLibrary()
        self.proto.ParseFromString(graph.library)
        self.functions = {f.signature.name: f for f in self.proto.function}
        self.uses = function_uses(graph)

    def own(self, loop: Node, part: str = "body") -> FunctionDef | None:
        """`loop`'s body (or cond), where no other node calls it."""
        ref = loop.attrs.get(part)
        fdef = self.functions.get(getattr(ref, "name", ""))
        if fdef is None or self.uses[fdef.signature.name] != 1:
            return None
        return fdef

    def replace(self, loop: Node, part: str, edited: FunctionDef) -> None:
        """Puts `edited` (a changed copy of `loop`'s `part`) in the library under a new name,
        and points `loop` at it."""
        old = self.functions.pop(loop.attrs[part].name)
        edited.signature.name = renamed(edited)
        self.proto.function.remove(old)
        self.proto.function.add().CopyFrom(edited)
        self.functions[edited.signature.name] = edited
        loop.attrs[part] = FuncRef(edited.signature.name, {})

    def pass_lists_through(self, loop: Node, indices: Iterable[int]) -> None:
        """Points `loop` at a copy of its body that returns its list arguments at `indices` as
        it got them (`pass_through`)."""
        body = edited(self.functions[loop.attrs["body"].name])
        for i in indices:
            pass_through(body, i)
        self.replace(loop, "body", body)

    def serialized(self) -> bytes:
        return self.proto.SerializeToString()


def accumulators(graph: Graph, library: Library) -> list[Accumulator]:
    """Every list that a forward loop's body only pushes into, once a trip, and that then
    feeds a gradient loop alone, whose body only pops from it, once a trip; the gradient loop's
    result for it unread."""
    loops = [n for n in graph if n.op in WHILE_OPS and isinstance(n.attrs.get("body"), FuncRef)]
    if len(loops) < 2:
        return []
    consumers = graph.consumers()
    fetched = graph.fetched()
    found = []
    for backward in loops:
        body = library.own(backward)
        if body is None:
            continue
        for m, pop in popped_lists(body):
            origin = _through_identities(graph, backward.inputs[m], consumers)
            if origin is None or backward.output(m) in fetched or consumers.get(backward.output(m)):
                continue
            forward = graph.node(origin.node)
            if forward.op not in WHILE_OPS or forward.name == backward.name:
                continue
            forward_body = library.own(forward)
            push = pushed_list(forward_body, origin.index) if forward_body else None
            if push is not None:
                read = readers(body)[f"{pop}:tensor:0"] > 0
                found.append(
                    Accumulator(forward.name, origin.index, backward.name, m, push, pop, read)
                )
    return found


def _through_identities(
    graph: Graph, ref: TensorRef, consumers: dict[TensorRef, list[str]]
) -> TensorRef | None:
    """The tensor `ref` is an Identity chain of, each link read by the next alone."""
    for _ in range(16):
        if len(consumers.get(ref, [])) != 1:
            return None
        node = graph.node(ref.node)
        if node.op != "Identity":
            return ref
        ref = node.inputs[0]
    return None


def source(value: str) -> str:
    """The node (or argument) a FunctionDef value spelling names."""
    return value.partition(":")[0]


def readers(fdef: FunctionDef) -> Counter[str]:
    """How many times each value is read, returns included."""
    reads: Counter[str] = Counter(i for nd in fdef.node_def for i in nd.input)
    reads.update(fdef.ret.values())
    return reads


def back_through_identities(fdef: FunctionDef, value: str) -> str:
    """What `value` is an Identity chain of, each link read once."""
    nodes = {nd.name: nd for nd in fdef.node_def}
    reads = readers(fdef)
    for _ in range(16):
        node = nodes.get(source(value))
        if node is None or node.op != "Identity" or reads[value] != 1:
            return value
        value = node.input[0]
    return value


def _list_op_at(fdef: FunctionDef, index: int, op: str, handle_out: str) -> str | None:
    """The `op` node by which `fdef` turns its list argument at `index` into the list it
    returns there, where nothing else reads the argument, the list, or waits for the node."""
    args, outs = fdef.signature.input_arg, fdef.signature.output_arg
    if index >= len(args) or index >= len(outs):
        return None
    reads = readers(fdef)
    value = back_through_identities(fdef, fdef.ret[outs[index].name])
    node = next((nd for nd in fdef.node_def if nd.name == source(value)), None)
    if node is None or node.op != op or value != f"{node.name}:{handle_out}:0":
        return None
    arg = args[index].name
    if back_through_identities(fdef, node.input[0]) != arg or reads[arg] != 1:
        return None
    if reads[value] != 1 or _waited_for(fdef, node.name):
        return None
    return node.name


def popped_lists(fdef: FunctionDef) -> list[tuple[int, str]]:
    """(position, pop node) of each list argument `fdef` only pops."""
    found = []
    for i in range(len(fdef.signature.input_arg)):
        pop = _list_op_at(fdef, i, POP, "output_handle")
        if pop is not None:
            found.append((i, pop))
    return found


def pushed_list(fdef: FunctionDef, index: int) -> str | None:
    """The push node, where `fdef` returns its list argument at `index` with one value pushed
    and reads that list nowhere else."""
    return _list_op_at(fdef, index, PUSH, "output_handle")


def _waited_for(fdef: FunctionDef, name: str) -> bool:
    return any(f"^{name}" in nd.input for nd in fdef.node_def) or name in fdef.control_ret.values()


def pass_through(fdef: FunctionDef, index: int) -> None:
    """`fdef` returns its argument at `index` as it got it: the push or pop (and the
    Identities) that made the returned list go. Raises ValueError where something else still
    reads one of them (a popped value: redirect its readers first)."""
    out = fdef.signature.output_arg[index].name
    arg = fdef.signature.input_arg[index].name
    nodes = {nd.name: nd for nd in fdef.node_def}
    dropped = set()
    value = fdef.ret[out]
    while value != arg and (node := nodes.get(source(value))) is not None:
        dropped.add(node.name)
        value = node.input[0]
    kept = [nd for nd in fdef.node_def if nd.name not in dropped]
    still = [i for nd in kept for i in nd.input if source(i.lstrip("^")) in dropped]
    still += [v for k, v in fdef.ret.items() if k != out and source(v) in dropped]
    if still:
        raise ValueError(f"{still[0]} is still read: the list cannot pass through")
    fdef.ret[out] = arg
    del fdef.node_def[:]
    fdef.node_def.extend(kept)


def add_node(fdef: FunctionDef, name: str, op: str) -> NodeDef:
    """A new node of `fdef` named `name` (or `name_1`, `name_2`, ... where that is taken)."""
    taken = {nd.name for nd in fdef.node_def}
    base, k = name, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    nd = fdef.node_def.add()
    nd.name, nd.op = name, op
    return nd


def add_const(fdef: FunctionDef, name: str, value: np.ndarray | np.generic) -> str:
    """A new Const of `fdef` holding `value`: the value's spelling."""
    nd = add_node(fdef, name, "Const")
    nd.attr["dtype"].type = tf.as_dtype(value.dtype).as_datatype_enum
    nd.attr["value"].CopyFrom(attr_value_pb2.AttrValue(tensor=tf.make_tensor_proto(value)))
    return f"{nd.name}:output:0"


def renamed(fdef: FunctionDef) -> str:
    """The tf_stitch name of a function whose content changed: its base and a new digest."""
    base = fdef.signature.name.split("_ts")[0]
    fdef.signature.name = base
    digest = hashlib.sha256(fdef.SerializeToString(deterministic=True)).hexdigest()[:10]
    return f"{base}_ts{digest}"


def edited(fdef: FunctionDef) -> FunctionDef:
    copy = FunctionDef()
    copy.CopyFrom(fdef)
    return copy
