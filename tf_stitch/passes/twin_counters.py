"""twin-counters: a loop that counts its trips twice counts them once.

TensorFlow's while_v2 gives every loop a trip counter of its own and, where the loop has a
`maximum_iterations`, tests it in the condition beside the loop's own test. A Keras RNN's loop
counts its time steps too, from the same 0 by the same 1, and tests it against the same
length: each trip runs two increments, two comparisons and a `LogicalAnd` (a Keras LSTM's
training step: 62 of those ops per 20 steps, each an op TensorFlow's executor runs in the
loop's frame).

Two integer loop variables that enter with the same value (one tensor, or equal constants) and
that the body advances by the same constant are equal on every trip (by induction). The body
and the condition read the first where they read the second, and the body returns the first's
next value for both; in the condition, a loop variable that enters as a constant and that the
body returns unchanged is that constant. The condition's duplicate ops (same op, same inputs,
same attributes; constants by value) are merged, `LogicalAnd(x, x)` is `x`, and ops nothing
reads go, in both functions.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import tensorflow as tf
from tensorflow.core.framework.node_def_pb2 import NodeDef

from tf_stitch.fusion.decision import Record, RecordKind, allow
from tf_stitch.graph.accumulators import (
    FunctionDef,
    Library,
    add_const,
    back_through_identities,
    edited,
    readers,
    source,
)
from tf_stitch.graph.ir import FuncRef, Graph, Node
from tf_stitch.graph.loop_constants import WHILE_OPS
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass

_COUNTER_TYPES = ("int32", "int64")
_ADDS = ("AddV2", "Add")
# Ops that may go when nothing reads them.
_PURE = frozenset({"Identity", "Const", "AddV2", "Add", "Less", "LessEqual", "LogicalAnd"})


@graph_pass("twin-counters")
def merge_twin_counters(graph: Graph, ctx: PassContext) -> Graph:
    """Merges the loop variables of each loop that count its trips alike."""
    out = graph.copy()
    library = Library(out)
    merged: Counter[str] = Counter()
    for loop in out:
        if loop.op not in WHILE_OPS or not isinstance(loop.attrs.get("body"), FuncRef):
            continue
        body, cond = library.own(loop, "body"), library.own(loop, "cond")
        if body is None or cond is None:
            continue
        twins = _twins(out, loop, body)
        constants = _invariant_constants(out, loop, body)
        if not twins:
            continue
        body, cond = edited(body), edited(cond)
        _read_first(body, twins)
        _read_first(cond, twins)
        for j, i in twins.items():
            outs = body.signature.output_arg
            body.ret[outs[j].name] = body.ret[outs[i].name]
        _constants_in(cond, constants)
        _merge_duplicates(cond)
        _drop_unread(body)
        _drop_unread(cond)
        library.replace(loop, "body", body)
        library.replace(loop, "cond", cond)
        merged[loop.name] = len(twins)
    if not merged:
        return graph
    out.library = library.serialized()
    for name, n in sorted(merged.items()):
        ctx.records.append(
            Record(
                f"twin-counters {name}",
                allow(f"{n} loop variables count its trips twice"),
                RecordKind.REWRITE,
            )
        )
    return out


def _step(body: FunctionDef, i: int) -> tuple[str, float] | None:
    """(dtype, step) where the body returns its argument `i` plus a constant."""
    arg = body.signature.input_arg[i].name
    value = back_through_identities(body, body.ret[body.signature.output_arg[i].name])
    nodes = {nd.name: nd for nd in body.node_def}
    node = nodes.get(source(value))
    if node is None or node.op not in _ADDS or value != f"{node.name}:z:0":
        return None
    a, b = (back_through_identities(body, x) for x in node.input[:2])
    if b == arg:
        a, b = b, a
    step = _const_scalar(nodes.get(source(b)))
    if a != arg or step is None:
        return None
    return tf.as_dtype(node.attr["T"].type).name, step


def _twins(graph: Graph, loop: Node, body: FunctionDef) -> dict[int, int]:
    """{j: i}: the loop variables j equal to an earlier i on every trip."""
    firsts: dict[tuple[object, ...], int] = {}
    twins: dict[int, int] = {}
    for i, ref in enumerate(loop.inputs):
        if graph.info(ref).dtype not in _COUNTER_TYPES or i >= len(body.signature.input_arg):
            continue
        step = _step(body, i)
        if step is None:
            continue
        start = constant_value(graph, ref)
        entry: object = ref if start is None or start.size != 1 else float(start.reshape(()))
        key = (*step, entry)
        if key in firsts:
            twins[i] = firsts[key]
        else:
            firsts[key] = i
    return twins


def _invariant_constants(graph: Graph, loop: Node, body: FunctionDef) -> dict[int, np.ndarray]:
    """The loop variables that enter as a scalar constant and that the body returns as it got
    them."""
    found = {}
    for i, ref in enumerate(loop.inputs):
        value = constant_value(graph, ref)
        if value is None or value.size != 1 or i >= len(body.signature.input_arg):
            continue
        arg = body.signature.input_arg[i].name
        returned = body.ret[body.signature.output_arg[i].name]
        if back_through_identities(body, returned) == arg:
            found[i] = value
    return found


def _read_first(fdef: FunctionDef, twins: dict[int, int]) -> None:
    args = fdef.signature.input_arg
    names = {args[j].name: args[i].name for j, i in twins.items()}
    for nd in fdef.node_def:
        nd.input[:] = [names.get(x, x) for x in nd.input]
    for key, value in list(fdef.ret.items()):
        fdef.ret[key] = names.get(value, value)


def _constants_in(cond: FunctionDef, constants: dict[int, np.ndarray]) -> None:
    """`cond` reads a constant of its own where it read an argument that is one."""
    args = cond.signature.input_arg
    for i, value in constants.items():
        if i >= len(args):
            continue
        name = args[i].name
        if not any(name in nd.input for nd in cond.node_def):
            continue
        const = add_const(cond, f"{name}/constant", value)
        for nd in cond.node_def:
            nd.input[:] = [const if x == name else x for x in nd.input]


def _merge_duplicates(fdef: FunctionDef) -> None:
    """Merges ops computing the same from the same (constants by value) until none is left;
    `LogicalAnd(x, x)` becomes `x`. Ops nothing reads go."""
    for _ in range(len(fdef.node_def)):
        nodes = {nd.name: nd for nd in fdef.node_def}
        seen: dict[tuple[object, ...], str] = {}
        moved: dict[str, str] = {}
        for nd in fdef.node_def:
            if (
                nd.op not in _PURE
                or nd.op == "Identity"
                or any(x.startswith("^") for x in nd.input)
            ):
                continue
            if nd.op == "LogicalAnd" and len(set(nd.input)) == 1:
                moved[f"{nd.name}:z:0"] = nd.input[0]
                break
            key = _key(nd, nodes)
            if key in seen:
                out = "output" if nd.op == "Const" else "z"
                moved[f"{nd.name}:{out}:0"] = f"{seen[key]}:{out}:0"
                break
            seen[key] = nd.name
        if not moved:
            return
        for nd in fdef.node_def:
            nd.input[:] = [moved.get(x, x) for x in nd.input]
        for key, value in list(fdef.ret.items()):
            fdef.ret[key] = moved.get(value, value)
        _drop_unread(fdef)


def _key(nd: NodeDef, nodes: dict[str, NodeDef]) -> tuple[object, ...]:
    def spelled(x: str) -> object:
        const = _const_scalar(nodes.get(source(x)))
        return ("const", const) if const is not None else x

    attrs = tuple(sorted((k, v.SerializeToString()) for k, v in nd.attr.items()))
    if nd.op == "Const":
        return ("Const", _const_scalar(nd), attrs)
    return (nd.op, tuple(spelled(x) for x in nd.input), attrs)


def _const_scalar(nd: NodeDef | None) -> float | None:
    if nd is None or nd.op != "Const":
        return None
    value = tf.make_ndarray(nd.attr["value"].tensor)
    return float(value.reshape(())) if value.size == 1 and value.ndim == 0 else None


def _drop_unread(fdef: FunctionDef) -> None:
    """Removes pure ops nothing reads, until none is left."""
    while True:
        reads = readers(fdef)
        waited = {x[1:] for nd in fdef.node_def for x in nd.input if x.startswith("^")}
        waited |= set(fdef.control_ret.values())
        read = {source(x) for x in reads}
        dead = [
            nd.name
            for nd in fdef.node_def
            if nd.op in _PURE and nd.name not in read and nd.name not in waited
        ]
        if not dead:
            return
        kept = [nd for nd in fdef.node_def if nd.name not in dead]
        del fdef.node_def[:]
        fdef.node_def.extend(kept)
