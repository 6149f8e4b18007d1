"""Frozen weights of a loop move into its body: `While(..., Const) -> While(...)` with the
constant defined inside the body (and the condition, where it reads it).

TensorFlow passes a resource loop input (a variable's handle) into a lowered loop through one
`Enter(is_constant=True)`. Once frozen, the variable is a float constant and a loop variable
like any other: every iteration runs a Merge, a Switch, a NextIteration and the body's Identity
for it. A Keras LSTM layer has three of them (kernel, recurrent kernel, bias), so a frozen
BiLSTM ran about 4 extra ops per weight per time step. Defined in the body, a constant costs one
Const op per iteration.

A loop variable is moved only if the loop passes it through unchanged (the body returns its
argument, maybe through an Identity), it is fed by a `Const` of the same graph (maybe through
Identities), the loop's functions serve this loop alone, and no fetched tensor is an output of
the loop. Loops of the main graph only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from tf_stitch.graph.io import GraphDef
from tf_stitch.graph.library import all_nodes, function_refs

WHILE_OPS = ("While", "StatelessWhile")


def sink_loop_constants(graph_def: GraphDef, fetched: Iterable[str] = ()) -> int:
    """Moves pass-through constant loop variables of `graph_def`'s While ops into their bodies,
    in place. `fetched` are tensor names that must stay as they are. Returns how many moved."""
    functions = {f.signature.name: f for f in graph_def.library.function}
    nodes = {n.name: n for n in graph_def.node}
    uses = Counter(ref.name for n in all_nodes(graph_def) for ref in function_refs(n))
    fetched_nodes = {_node_of(t) for t in fetched}
    moved = 0
    for node in list(graph_def.node):
        if node.op not in WHILE_OPS or node.name in fetched_nodes:
            continue
        body = functions.get(node.attr["body"].func.name)
        cond = functions.get(node.attr["cond"].func.name)
        if (
            body is None
            or cond is None
            or uses[body.signature.name] + uses[cond.signature.name] != 2
        ):
            continue
        sunk = [i for i in range(len(node.input)) if _movable(node, i, body, nodes)]
        if sunk:
            _sink(graph_def, node, sunk, body, cond, nodes)
            moved += len(sunk)
    return moved


def _node_of(tensor: str) -> str:
    return tensor.lstrip("^").split(":")[0]


def _movable(node: Any, i: int, body: Any, nodes: dict[str, Any]) -> bool:
    source = node.input[i]
    if source.startswith("^") or i >= len(body.signature.input_arg):
        return False
    if _constant_of(source, nodes) is None:
        return False
    arg = body.signature.input_arg[i].name
    returned = body.ret.get(body.signature.output_arg[i].name, "")
    if returned == arg:
        return True  # passed through unchanged
    identity = next((n for n in body.node_def if returned == f"{n.name}:output:0"), None)
    return identity is not None and identity.op == "Identity" and identity.input[0] == arg


def _constant_of(source: str, nodes: dict[str, Any]) -> Any:
    """The Const node `source` is (through Identities without control inputs), else None."""
    for _ in range(8):
        producer = nodes.get(_node_of(source))
        if producer is None or any(s.startswith("^") for s in producer.input):
            return None
        if ":" in source and source.split(":")[1] != "0":
            return None
        if producer.op == "Const":
            return producer
        if producer.op != "Identity":
            return None
        source = producer.input[0]
    return None


def _sink(
    graph_def: GraphDef, node: Any, sunk: list[int], body: Any, cond: Any, nodes: dict[str, Any]
) -> None:
    constants = {i: _constant_of(node.input[i], nodes) for i in sunk}
    for function in (body, cond):
        for i in sunk:
            _define_inside(function, function.signature.input_arg[i].name, constants[i])
        _drop_args(function, sunk)
    for i in sorted(sunk, reverse=True):
        out = body.signature.output_arg[i].name
        del body.ret[out]
        del body.signature.output_arg[i]
    kept = [i for i in range(len(node.input)) if i not in sunk]
    renumber = {old: new for new, old in enumerate(kept)}
    _drop_while_inputs(node, sunk, renumber)
    for other in graph_def.node:
        for k, source in enumerate(other.input):
            if source.startswith("^") or _node_of(source) != node.name:
                continue
            index = int(source.split(":")[1]) if ":" in source else 0
            if index in constants:
                other.input[k] = constants[index].name
            else:
                other.input[k] = f"{node.name}:{renumber[index]}"


def _define_inside(function: Any, arg: str, constant: Any) -> None:
    """A copy of `constant` in `function`, read where `arg` was (none if nothing reads it)."""
    if not any(source == arg for n in function.node_def for source in n.input):
        return
    names = {n.name for n in function.node_def}
    name = f"{arg}_sunk"
    while name in names:
        name += "_"
    copy = function.node_def.add()
    copy.name = name
    copy.op = "Const"
    copy.attr["dtype"].CopyFrom(constant.attr["dtype"])
    copy.attr["value"].CopyFrom(constant.attr["value"])
    reference = f"{name}:output:0"
    for n in function.node_def:
        for k, source in enumerate(n.input):
            if source == arg:
                n.input[k] = reference


def _drop_args(function: Any, sunk: list[int]) -> None:
    for i in sorted(sunk, reverse=True):
        del function.signature.input_arg[i]
    for table in (function.arg_attr, function.resource_arg_unique_id):
        old = {k: table[k] for k in table if k not in sunk}
        table.clear()
        for k, value in old.items():
            new_key = k - sum(1 for s in sunk if s < k)
            if hasattr(value, "CopyFrom"):
                table[new_key].CopyFrom(value)
            else:
                table[new_key] = value


def _drop_while_inputs(node: Any, sunk: list[int], renumber: dict[int, int]) -> None:
    data = [s for s in node.input if not s.startswith("^")]
    control = [s for s in node.input if s.startswith("^")]
    del node.input[:]
    node.input.extend([s for i, s in enumerate(data) if i not in sunk] + control)
    types = list(node.attr["T"].list.type)
    del node.attr["T"].list.type[:]
    node.attr["T"].list.type.extend(t for i, t in enumerate(types) if i not in sunk)
    if "output_shapes" in node.attr:
        shapes = list(node.attr["output_shapes"].list.shape)
        del node.attr["output_shapes"].list.shape[:]
        node.attr["output_shapes"].list.shape.extend(
            s for i, s in enumerate(shapes) if i not in sunk
        )
    if "_read_only_resource_inputs" in node.attr:
        indices = list(node.attr["_read_only_resource_inputs"].list.i)
        del node.attr["_read_only_resource_inputs"].list.i[:]
        node.attr["_read_only_resource_inputs"].list.i.extend(
            renumber[i] for i in indices if i in renumber
        )
    if "_num_original_outputs" in node.attr:
        node.attr["_num_original_outputs"].i -= len(sunk)
