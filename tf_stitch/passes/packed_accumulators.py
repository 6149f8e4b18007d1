"""packed-accumulators: on a CPU, a forward loop pushes the values of one trip its gradient loop
reads as one tensor, and the gradient loop pops them as one.

A loop's gradient saves, at every trip of the forward loop, each value its backward step reads
(graph/accumulators.py): one `TensorListPushBack` per value in the forward body and one
`TensorListPopBack` in the gradient body, every trip. A Keras LSTM's training step saves nine
([batch, 64] gates and states, the [batch, 32] input): 360 list ops per step of 20 steps, each
an op TensorFlow's executor runs in the loop's frame — on a CPU, more than all its kernels.

Where the values of one dtype and rank have the same sizes on every axis but the last (known
sizes, or unknown ones that `fusion/loop_dims.py` proves to be the same size on every trip), and
known sizes on the last, the forward body concatenates them along it (`ConcatV2`) and pushes
that, and the gradient body pops it and splits it again (`SplitV` with constant sizes): two
ops each way in place of n. The other lists pass through both loops untouched.

Only for a CPU: on a GPU the pushes and pops are host-side bookkeeping that launch nothing,
while the concatenation and the split are two kernels a trip; the plan records why
(`CPU_ONLY`), so that a GPU's count is taken of the plan without them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from tf_stitch.fusion.decision import Record, RecordKind, allow
from tf_stitch.fusion.loop_dims import Seeds
from tf_stitch.graph.accumulators import (
    Accumulator,
    FunctionDef,
    Library,
    accumulators,
    add_const,
    add_node,
    edited,
    pass_through,
)
from tf_stitch.graph.ir import Graph, Node
from tf_stitch.graph.list_shapes import ListElements
from tf_stitch.passes.base import PassContext
from tf_stitch.passes.builder import NodeBuilder

CPU_ONLY = "packed on a CPU only"
MIN_PACKED = 2


@dataclass(frozen=True)
class _Member:
    acc: Accumulator
    shape: tuple[int | None, ...]
    dtype: str


def pack_accumulators(
    graph: Graph,
    ctx: PassContext,
    seeds: Mapping[str, tuple[str, Seeds]],
    lists: Mapping[str, Mapping[int, ListElements]],
) -> Graph:
    """`graph` with the accumulators of each forward/gradient loop pair packed, per dtype and
    shape (see the module doc). `seeds` are the loops' marks (`loop_seeds`), `lists` the element
    shapes of each loop's list inputs (`list_element_shapes`), both by loop name, found on the
    graph before its loops' bodies were optimized."""
    if ctx.options.gpu:
        return graph
    out = graph.copy()
    library = Library(out)
    pairs: dict[tuple[str, str], list[_Member]] = {}
    for acc in accumulators(out, library):
        shape, dtype = lists.get(acc.backward, {}).get(acc.backward_index, (None, ""))
        if acc.popped_read and shape and shape[-1] is not None:
            pairs.setdefault((acc.forward, acc.backward), []).append(_Member(acc, shape, dtype))
    packed = 0
    for (forward, backward), members in pairs.items():
        marks = seeds.get(backward, (None, Seeds()))[1]
        for group in _groups(members, marks):
            empty = _empty_list(out, out.node(forward), group[0].acc.index)
            if empty is None:
                continue
            _pack(out, library, out.node(forward), out.node(backward), group, empty)
            packed += len(group)
            ctx.records.append(
                Record(
                    f"packed-accumulators {forward}",
                    allow(
                        f"{len(group)} values ({group[0].dtype}, last axis "
                        f"{'+'.join(str(m.shape[-1]) for m in group)}) pushed and popped as one "
                        f"tensor ({CPU_ONLY})"
                    ),
                    RecordKind.REWRITE,
                )
            )
    if not packed:
        return graph
    out.library = library.serialized()
    return out


def has_packed_accumulators(records: Iterable[Record]) -> bool:
    """Whether a plan packed accumulators, which a GPU's plan would not."""
    return any(r.decision and CPU_ONLY in r.decision.reason for r in records)


def _groups(members: list[_Member], marks: Seeds) -> list[list[_Member]]:
    """The members that can be packed together: one dtype and rank, every axis but the last of
    one size (known, or of one proven class)."""
    by_key: dict[tuple[object, ...], list[_Member]] = {}
    for m in members:
        classes = marks.elements.get(m.acc.backward_index, [])
        prefix: list[object] = []
        for a, size in enumerate(m.shape[:-1]):
            if size is not None:
                prefix.append(size)
            elif a < len(classes) and classes[a] >= 0:
                prefix.append(("class", classes[a]))
            else:
                break
        else:
            by_key.setdefault((m.dtype, len(m.shape), *prefix), []).append(m)
    return [g for g in by_key.values() if len(g) >= MIN_PACKED]


def _pack(
    graph: Graph,
    library: Library,
    forward: Node,
    backward: Node,
    group: list[_Member],
    empty: Node,
) -> None:
    first = group[0].acc
    axis = len(group[0].shape) - 1
    dtype = tf.as_dtype(group[0].dtype).as_datatype_enum
    # The forward body: one concatenation pushed into the first list.
    body = edited(library.functions[forward.attrs["body"].name])
    nodes = {nd.name: nd for nd in body.node_def}
    push = nodes[first.push]
    scope = f"{first.push}/packed"
    axis_const = add_const(body, f"{scope}/axis", np.int32(axis))
    concat = add_node(body, f"{scope}/concat", "ConcatV2")
    concat.input.extend([nodes[m.acc.push].input[1] for m in group] + [axis_const])
    for m in group:  # what a push waited for, the concatenation waits for
        concat.input.extend(i for i in nodes[m.acc.push].input if i.startswith("^"))
    concat.attr["N"].i = len(group)
    concat.attr["T"].type = dtype
    concat.attr["Tidx"].type = tf.int32.as_datatype_enum
    push.input[1] = f"{concat.name}:output:0"
    for m in group[1:]:
        pass_through(body, m.acc.index)
    _forget_arg_shapes(body, [first.index])
    library.replace(forward, "body", body)
    # The gradient body: the first list's pop, split again.
    body = edited(library.functions[backward.attrs["body"].name])
    nodes = {nd.name: nd for nd in body.node_def}
    pop = nodes[first.pop]
    scope = f"{first.pop}/packed"
    pop.input[1] = add_const(body, f"{scope}/element_shape", np.int32(-1))
    sizes = add_const(body, f"{scope}/sizes", np.asarray([m.shape[-1] for m in group], np.int32))
    split = add_node(body, f"{scope}/split", "SplitV")
    split.input.extend(
        [f"{pop.name}:tensor:0", sizes, add_const(body, f"{scope}/axis", np.int32(axis))]
    )
    split.attr["num_split"].i = len(group)
    split.attr["T"].type = dtype
    split.attr["Tlen"].type = tf.int32.as_datatype_enum
    moved = {f"{m.acc.pop}:tensor:0": f"{split.name}:output:{k}" for k, m in enumerate(group)}
    for nd in body.node_def:
        if nd is not split:
            nd.input[:] = [moved.get(i, i) for i in nd.input]
    for key, value in list(body.ret.items()):
        body.ret[key] = moved.get(value, value)
    for m in group[1:]:
        pass_through(body, m.acc.backward_index)
    _forget_arg_shapes(body, [first.backward_index])
    library.replace(backward, "body", body)
    for loop, index in ((forward, first.index), (backward, first.backward_index)):
        cond = library.own(loop, "cond")
        if cond is not None and index in cond.arg_attr:
            cond = edited(cond)
            _forget_arg_shapes(cond, [index])
            library.replace(loop, "cond", cond)
    # Outside: the packed list starts from a list of its own, of any element shape.
    _own_empty_list(graph, forward, first.index, empty)


def _empty_list(graph: Graph, loop: Node, index: int) -> Node | None:
    """The `EmptyTensorList` the loop's list at `index` starts from (through Identities)."""
    ref = loop.inputs[index]
    for _ in range(16):
        node = graph.node(ref.node)
        if node.op != "Identity" or not node.inputs:
            return node if node.op == "EmptyTensorList" else None
        ref = node.inputs[0]
    return None


def _own_empty_list(graph: Graph, loop: Node, index: int, node: Node) -> None:
    """`loop`'s list at `index` starts from a copy of `node`, its `EmptyTensorList`, of any
    element shape."""
    shape = NodeBuilder(graph, node.name, node.device).const(
        np.int32(-1), "int32", "packed_element_shape"
    )
    fresh = Node(
        graph.unique_name(f"{node.name}/packed"),
        node.op,
        [shape, *node.inputs[1:]],
        dict(node.attrs),
        list(node.outputs),
        list(node.control_inputs),
        node.device,
    )
    graph.add(fresh)
    loop.inputs[index] = fresh.output(0)


def _forget_arg_shapes(fdef: FunctionDef, indices: list[int]) -> None:
    """Drops what `fdef` recorded of its arguments at `indices` (the shapes of a list's
    elements among it), which packing changed."""
    for i in indices:
        if i in fdef.arg_attr:
            del fdef.arg_attr[i]
