"""dead-accumulators: a forward loop stops pushing the values its gradient loop no longer reads.

The gradient of a While loop (TensorFlow's while_v2) saves, at every trip of the forward loop,
each forward value its backward step reads: the forward body pushes it into a TensorList (an
accumulator) and the backward body pops it. Once the backward body is stitched
(passes/loop_bodies.py), some of those values are read no more: the shapes a
`BroadcastGradientArgs` took (resolved statically), a value a kernel recomputes. TensorFlow still
runs the push on every forward trip and Grappler drops only the pop (a Keras LSTM's training
step: 5 of the 15 values pushed per trip, 100 ops per step, for nothing).

For each list a backward loop only pops, and whose popped value nobody reads, the pop goes from
its body, which returns the list as it got it, and the push goes from the body of the forward
loop the list comes from, which also returns it as it got it; both functions are renamed (their
content changed). Only where the list is exactly that: the forward loop's output feeds the
backward loop alone, the backward loop's output is unread, and each body touches the list with
that one push or pop; loops whose body another node also calls are left alone.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass

from tensorflow.core.framework import function_pb2

from tf_stitch.fusion.decision import Record, allow
from tf_stitch.graph.ir import FuncRef, Graph, TensorRef
from tf_stitch.graph.loop_constants import WHILE_OPS
from tf_stitch.passes.base import PassContext, graph_pass

PUSH, POP = "TensorListPushBack", "TensorListPopBack"


@dataclass(frozen=True)
class _Accumulator:
    forward: str  # the forward While node
    index: int  # the list's position among the forward loop's variables
    backward: str  # the backward While node
    backward_index: int


@graph_pass("dead-accumulators")
def drop_dead_accumulators(graph: Graph, ctx: PassContext) -> Graph:
    """Removes the push and pop of every accumulator whose popped value is never read."""
    loops = [n for n in graph if n.op in WHILE_OPS and isinstance(n.attrs.get("body"), FuncRef)]
    if len(loops) < 2:
        return graph
    library = function_pb2.FunctionDefLibrary()
    library.ParseFromString(graph.library)
    functions = {f.signature.name: f for f in library.function}
    uses = _function_uses(graph, library)
    consumers = graph.consumers()
    fetched = graph.fetched()
    dead: list[_Accumulator] = []
    for backward in loops:
        body = functions.get(backward.attrs["body"].name)
        if body is None or uses[body.signature.name] != 1:
            continue
        for m in _popped_unread(body):
            source = _through_identities(graph, backward.inputs[m], consumers)
            if source is None or backward.output(m) in fetched or consumers.get(backward.output(m)):
                continue
            forward = graph.node(source.node)
            if forward.op not in WHILE_OPS or forward.name == backward.name:
                continue
            forward_body = functions.get(getattr(forward.attrs.get("body"), "name", ""))
            if forward_body is None or uses[forward_body.signature.name] != 1:
                continue
            if _pushed_only(forward_body, source.index):
                dead.append(_Accumulator(forward.name, source.index, backward.name, m))
    if not dead:
        return graph
    out = graph.copy()
    edits: dict[str, list[int]] = {}
    for acc in dead:
        edits.setdefault(acc.forward, []).append(acc.index)
        edits.setdefault(acc.backward, []).append(acc.backward_index)
    for loop_name, indices in edits.items():
        loop = out.node(loop_name)
        fdef = functions[loop.attrs["body"].name]
        new = function_pb2.FunctionDef()
        new.CopyFrom(fdef)
        for i in indices:
            _pass_through(new, i)
        new.signature.name = _renamed(new)
        library.function.remove(fdef)
        library.function.add().CopyFrom(new)
        loop.attrs["body"] = FuncRef(new.signature.name, {})
    out.library = library.SerializeToString()
    per_forward = Counter(acc.forward for acc in dead)
    for name, n in sorted(per_forward.items()):
        ctx.records.append(
            Record(
                f"dead-accumulators {name}",
                allow(f"{n} values its gradient loop never reads are not pushed on every trip"),
            )
        )
    return out


def _function_uses(graph: Graph, library: function_pb2.FunctionDefLibrary) -> Counter[str]:
    uses: Counter[str] = Counter()
    for node in graph:
        uses.update(v.name for v in node.attrs.values() if isinstance(v, FuncRef))
    for fdef in library.function:
        for nd in fdef.node_def:
            for value in nd.attr.values():
                if value.HasField("func"):
                    uses[value.func.name] += 1
                uses.update(f.name for f in value.list.func)
    return uses


def _through_identities(
    graph: Graph, ref: TensorRef, consumers: dict[TensorRef, list[str]]
) -> TensorRef | None:
    """The tensor `ref` is an Identity chain of, each link read by the next alone."""
    for _ in range(16):
        node = graph.node(ref.node)
        if node.op != "Identity":
            return ref if len(consumers.get(ref, [])) == 1 else None
        if len(consumers.get(ref, [])) != 1 or ref in graph.fetched():
            return None
        ref = node.inputs[0]
    return None


# -- function bodies (FunctionDef protos: edited in place of a round trip through the IR) ----


def _source(name: str) -> tuple[str, str]:
    """(node or argument, output) of a FunctionDef input spelling `node:output:i` / `arg`."""
    node, _, rest = name.partition(":")
    return node, rest


def _readers(fdef: function_pb2.FunctionDef) -> Counter[str]:
    """How many times each value (`node:output:i` or `arg`) is read, returns included."""
    reads: Counter[str] = Counter(i for nd in fdef.node_def for i in nd.input)
    reads.update(fdef.ret.values())
    return reads


def _back_through_identities(fdef: function_pb2.FunctionDef, value: str) -> str:
    nodes = {nd.name: nd for nd in fdef.node_def}
    reads = _readers(fdef)
    for _ in range(16):
        node = nodes.get(_source(value)[0])
        if node is None or node.op != "Identity" or reads[value] != 1:
            return value
        value = node.input[0]
    return value


def _popped_unread(fdef: function_pb2.FunctionDef) -> list[int]:
    """Positions of the list arguments `fdef` only pops, returning the popped list as its
    value at the same position, without reading what it pops."""
    reads = _readers(fdef)
    nodes = {nd.name: nd for nd in fdef.node_def}
    found = []
    for i, (arg, out) in enumerate(
        zip(fdef.signature.input_arg, fdef.signature.output_arg, strict=False)
    ):
        value = _back_through_identities(fdef, fdef.ret[out.name])
        node = nodes.get(_source(value)[0])
        if node is None or node.op != POP or value != f"{node.name}:output_handle:0":
            continue
        if _back_through_identities(fdef, node.input[0]) != arg.name or reads[arg.name] != 1:
            continue
        if reads[f"{node.name}:tensor:0"] or reads[value] != 1 or _controls(fdef, node.name):
            continue
        found.append(i)
    return found


def _pushed_only(fdef: function_pb2.FunctionDef, index: int) -> bool:
    """Whether `fdef` returns at `index` its argument there with one value pushed, and reads
    that list nowhere else."""
    if index >= len(fdef.signature.output_arg) or index >= len(fdef.signature.input_arg):
        return False
    reads = _readers(fdef)
    arg = fdef.signature.input_arg[index].name
    value = _back_through_identities(fdef, fdef.ret[fdef.signature.output_arg[index].name])
    node = next((nd for nd in fdef.node_def if nd.name == _source(value)[0]), None)
    if node is None or node.op != PUSH or value != f"{node.name}:output_handle:0":
        return False
    if _back_through_identities(fdef, node.input[0]) != arg or reads[arg] != 1:
        return False
    return reads[value] == 1 and not _controls(fdef, node.name)


def _controls(fdef: function_pb2.FunctionDef, name: str) -> bool:
    return any(f"^{name}" in nd.input for nd in fdef.node_def) or name in fdef.control_ret.values()


def _pass_through(fdef: function_pb2.FunctionDef, index: int) -> None:
    """`fdef` returns its argument at `index` as it got it; the push or pop (and Identities)
    that made the returned list go."""
    out = fdef.signature.output_arg[index].name
    arg = fdef.signature.input_arg[index].name
    dropped = set()
    value = fdef.ret[out]
    nodes = {nd.name: nd for nd in fdef.node_def}
    while (node := nodes.get(_source(value)[0])) is not None:
        dropped.add(node.name)
        value = node.input[0]
        if value == arg:
            break
    fdef.ret[out] = arg
    kept = [nd for nd in fdef.node_def if nd.name not in dropped]
    del fdef.node_def[:]
    fdef.node_def.extend(kept)


def _renamed(fdef: function_pb2.FunctionDef) -> str:
    """The tf_stitch name of a function whose content changed: its base and a new digest."""
    base = fdef.signature.name.split("_ts")[0]
    fdef.signature.name = base
    digest = hashlib.sha256(fdef.SerializeToString(deterministic=True)).hexdigest()[:10]
    return f"{base}_ts{digest}"
