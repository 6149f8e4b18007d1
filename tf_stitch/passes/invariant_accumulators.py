"""invariant-accumulators: a value the same on every trip of a forward loop is given to its
gradient loop once, not pushed and popped on every trip.

A Keras LSTM reads its kernel and recurrent kernel inside its loop's body, so the loop's
gradient (TensorFlow's while_v2) saves the two weights on every trip: a push each in the forward
loop and a pop each in the gradient loop, 80 ops per training step of 20 steps, for values that
never change within the step. Where the pushed value is a loop variable the forward body
returns unchanged (a frozen or read-only weight's value), or a read of a variable the forward
body passes through unchanged and never writes, the gradient loop takes that value as a loop
variable of its own in place of the list: the value the forward loop got, or one read of the
variable after the forward loop (nothing may write the variable between the forward loop and
the gradient loop: every other op that takes the variable must come after the gradient loop).
The forward body stops pushing; the gradient body reads its argument where it read the popped
value and returns it unchanged; the gradient loop's cond takes the new type.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import tensorflow as tf

from tf_stitch.fusion.decision import Record, RecordKind, allow
from tf_stitch.graph.accumulators import (
    Accumulator,
    FunctionDef,
    Library,
    accumulators,
    edited,
    pass_through,
    source,
)
from tf_stitch.graph.ir import AttrList, DType, Graph, Node, ShapeValue, TensorInfo, TensorRef
from tf_stitch.passes.base import PassContext, graph_pass

# What may take the variable's handle without writing it.
_READS = frozenset({"ReadVariableOp", "VariableShape"})


@graph_pass("invariant-accumulators")
def give_invariants_once(graph: Graph, ctx: PassContext) -> Graph:
    """Replaces each accumulator of a loop-invariant value by that value, given once."""
    out = graph.copy()
    library = Library(out)
    found: list[tuple[Accumulator, TensorRef]] = []
    for acc in accumulators(out, library):
        if not acc.popped_read:
            continue
        value = _invariant_value(out, library, acc)
        if value is not None:
            found.append((acc, value))
    if not found:
        return graph
    forward_edits: dict[str, list[int]] = {}
    backward_edits: dict[str, list[tuple[Accumulator, TensorRef]]] = {}
    for acc, value in found:
        forward_edits.setdefault(acc.forward, []).append(acc.index)
        backward_edits.setdefault(acc.backward, []).append((acc, value))
    for name, indices in forward_edits.items():
        library.pass_lists_through(out.node(name), indices)
    for name, edits in backward_edits.items():
        _give_values(out, library, out.node(name), edits)
    out.library = library.serialized()
    for name, n in sorted(Counter(acc.forward for acc, _ in found).items()):
        ctx.records.append(
            Record(
                f"invariant-accumulators {name}",
                allow(f"{n} values the same on every trip go to its gradient loop once"),
                RecordKind.REWRITE,
            )
        )
    return out


def _invariant_value(graph: Graph, library: Library, acc: Accumulator) -> TensorRef | None:
    """The tensor, outside the loops, that the forward loop pushes on every trip (a new read
    of a variable is added to `graph`), or None where the pushed value may change."""
    forward = graph.node(acc.forward)
    body = library.functions[forward.attrs["body"].name]
    push = next(nd for nd in body.node_def if nd.name == acc.push)
    if library.own(graph.node(acc.backward), "cond") is None:
        return None
    value = _origin(body, push.input[1])
    nodes = {nd.name: nd for nd in body.node_def}
    node = nodes.get(source(value))
    if node is not None and node.op == "ReadVariableOp":
        position = _passed_through(body, _origin(body, node.input[0]))
        if position is None or not _only_read(body, body.signature.input_arg[position].name):
            return None
        handle = forward.inputs[position]
        if not _untouched_between(graph, handle, forward, graph.node(acc.backward)):
            return None
        return _read_after(graph, handle, forward, node.attr["dtype"].type)
    position = _passed_through(body, value)
    return None if position is None else forward.inputs[position]


def _origin(body: FunctionDef, value: str) -> str:
    """What `value` is an Identity (chain) of."""
    nodes = {nd.name: nd for nd in body.node_def}
    for _ in range(16):
        node = nodes.get(source(value))
        if node is None or node.op != "Identity":
            return value
        value = node.input[0]
    return value


def _passed_through(body: FunctionDef, value: str) -> int | None:
    """The position of the argument `value` is, where the body returns it unchanged there."""
    args = [a.name for a in body.signature.input_arg]
    if value not in args:
        return None
    i = args.index(value)
    returned = body.ret[body.signature.output_arg[i].name]
    return i if _origin(body, returned) == value else None


def _only_read(body: FunctionDef, arg: str) -> bool:
    """Whether every op of `body` that takes `arg` (a variable's handle) only reads it."""
    identities = {arg}
    changed = True
    while changed:
        changed = False
        for nd in body.node_def:
            fed = nd.op == "Identity" and nd.input and source(nd.input[0]) in identities
            if fed and nd.name not in identities:
                identities.add(nd.name)
                changed = True
    for nd in body.node_def:
        if nd.op in _READS or nd.op == "Identity":
            continue
        if any(source(i) in identities for i in nd.input):
            return False
    return True


def _untouched_between(graph: Graph, handle: TensorRef, forward: Node, backward: Node) -> bool:
    """Whether every op but the two loops that takes `handle` (through Identities), other than
    a read, waits for `backward`: then nothing writes the variable between the loops."""
    later = _after(graph, backward.name)
    takers = list(_takers(graph, handle))
    return all(
        n.name in (forward.name, backward.name) or n.op in _READS or n.name in later for n in takers
    )


def _takers(graph: Graph, handle: TensorRef) -> Iterable[Node]:
    refs = {handle}
    for node in graph.topological_order():
        if any(r in refs for r in node.inputs):
            if node.op == "Identity":
                refs.add(node.output(0))
            else:
                yield node


def _after(graph: Graph, name: str) -> set[str]:
    """The nodes that wait for `name`, by data or control edges."""
    consumers = graph.consumers()
    controls = graph.control_consumers()
    node = graph.node(name)
    seen: set[str] = set()
    stack = [r for i in range(len(node.outputs)) for r in consumers.get(node.output(i), [])]
    stack += controls.get(name, [])
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        later = graph.node(n)
        for i in range(len(later.outputs)):
            stack.extend(consumers.get(later.output(i), []))
        stack.extend(controls.get(n, []))
    return seen


def _read_after(graph: Graph, handle: TensorRef, forward: Node, dtype_enum: int) -> TensorRef:
    """A new read of the variable `handle`, after `forward`."""
    dtype = tf.as_dtype(dtype_enum).name
    node = Node(
        graph.unique_name(f"{forward.name}/invariant_read"),
        "ReadVariableOp",
        [handle],
        {"dtype": DType(dtype)},
        [TensorInfo(dtype, None)],
        [forward.name],
        forward.device,
    )
    return graph.add(node).output(0)


def _give_values(
    graph: Graph, library: Library, loop: Node, edits: list[tuple[Accumulator, TensorRef]]
) -> None:
    """`loop` (a gradient loop) takes each value in place of its list: its input, type and
    shape there, its body's and cond's argument types, its body's reads of the popped value."""
    body = edited(library.functions[loop.attrs["body"].name])
    cond_fdef = library.own(loop, "cond")
    assert cond_fdef is not None  # checked by _invariant_value's caller
    cond = edited(cond_fdef)
    types = list(loop.attrs["T"].items)
    shapes = list(loop.attrs["output_shapes"].items) if "output_shapes" in loop.attrs else None
    for acc, value in edits:
        m = acc.backward_index
        info = graph.info(value)
        arg = body.signature.input_arg[m].name
        for nd in body.node_def:
            nd.input[:] = [arg if i == f"{acc.pop}:tensor:0" else i for i in nd.input]
        for key, returned in list(body.ret.items()):
            if returned == f"{acc.pop}:tensor:0":
                body.ret[key] = arg
        pass_through(body, m)
        enum = DType(info.dtype)
        type_enum = tf.as_dtype(info.dtype).as_datatype_enum
        for fdef in (body, cond):
            fdef.signature.input_arg[m].type = type_enum
            if m in fdef.arg_attr:
                del fdef.arg_attr[m]
        body.signature.output_arg[m].type = type_enum
        types[m] = enum
        if shapes is not None:
            shapes[m] = ShapeValue(info.shape)
        loop.inputs[m] = value
        loop.outputs[m] = TensorInfo(info.dtype, info.shape)
    loop.attrs["T"] = AttrList("type", tuple(types))
    if shapes is not None:
        loop.attrs["output_shapes"] = AttrList("shape", tuple(shapes))
    library.replace(loop, "body", body)
    library.replace(loop, "cond", cond)
