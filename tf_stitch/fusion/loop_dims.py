"""Which unknown sizes of a loop's body equal sizes outside it, on every trip.

A body is optimized as a graph of its own (passes/loop_bodies.py), whose arguments have
unknown sizes unrelated to anything: the batch of a Keras LSTM's state and the batch of the
time step it reads are two symbols there, though both are the batch of the layer's input. The
backward loop of its gradient pops, each trip, values and shapes the forward loop pushed, and
`BroadcastGradientArgs` of two such shapes decides at run time which axes a gradient sums over:
an unresolved reduction and a `Reshape` per broadcasting op of the cell, every trip
(passes/broadcast_grads.py resolves them only where the sizes are proven equal).

`loop_seeds(graph)` proves, for each loop, by induction over its trips:
- the loop's inputs carry the classes the graph proves (`SymbolicDims(proven=True)`), the
  elements of an input TensorList those of the tensor it was made from, or those of what an
  earlier loop pushed into it;
- assuming every argument has them (the arguments marked with shared class numbers, read by
  SymbolicDims as seeds), the body's results must have them again; an argument's axis whose
  result does not is unmarked, and the body analysed again, until the marks hold (they only
  ever shrink). What is left holds on entry and is kept by every trip, hence on every trip;
- what the body pushes into a list it returns is recorded in the graph's classes, so that a
  later loop popping it (the gradient's) gets its elements' classes, and for lists of shapes
  (`Shape(t)` pushed) the classes of the sizes they hold; a loop's results share its
  inputs' classes for the rest of the graph.

The marks are given to the body graph by `mark_body` (attributes on its Placeholders); only
proofs use them, the function TensorFlow runs is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import tensorflow as tf

from tf_stitch.fusion.dim_relations import Dim
from tf_stitch.fusion.symbolic_dims import (
    SEED_DIMS,
    SEED_ELEMENT_DIMS,
    SEED_ELEMENT_SIZES,
    SEED_ELEMENT_VALUES,
    SymbolicDims,
    seed_classes,
)
from tf_stitch.graph.functions import function_graph, original_bodies
from tf_stitch.graph.ir import AttrList, FuncRef, Graph, Node, TensorRef
from tf_stitch.graph.list_shapes import list_element_shapes
from tf_stitch.graph.loop_constants import WHILE_OPS

BodyGraph = Callable[[Node], Graph | None]
NONE = -1  # no class: a known size, or one nothing relates


@dataclass
class Seeds:
    """One loop's marks, by argument index: the class of each axis of a tensor argument, of
    each axis of a list argument's elements, and of each size a list of shapes holds (with
    the sizes known)."""

    dims: dict[int, list[int]] = field(default_factory=dict)
    elements: dict[int, list[int]] = field(default_factory=dict)
    values: dict[int, tuple[list[int], list[int]]] = field(default_factory=dict)

    def empty(self) -> bool:
        return not any(k >= 0 for c in [*self.dims.values(), *self.elements.values()] for k in c)


@dataclass(frozen=True)
class Elements:
    """What a loop's list result holds, in the graph's terms: per axis of the elements, a dim
    of the graph of the same size (None where unknown); for shape vectors, per size held."""

    dims: tuple[Dim | None, ...]
    values: tuple[tuple[Dim | None, int], ...] | None  # (class, known size or -1)


def loop_seeds(graph: Graph) -> dict[str, tuple[str, Seeds]]:
    """The marks of each loop of `graph` (by node name, with its body's name)."""
    loops = [
        n
        for n in graph.topological_order()
        if n.op in WHILE_OPS and isinstance(n.attrs.get("body"), FuncRef)
    ]
    if not loops:
        return {}
    body_graph = original_bodies(graph)
    joins: list[tuple[Dim, Dim]] = []
    lists: dict[TensorRef, Elements] = {}
    found: dict[str, tuple[str, Seeds]] = {}
    consumers = graph.consumers()
    dims, known = SymbolicDims(graph, proven=True), 0
    for loop in loops:
        if len(joins) > known:  # what the loops before proved
            dims, known = SymbolicDims(graph, proven=True, extra=joins), len(joins)
        try:
            shapes = [o.shape for o in loop.outputs]
            element_shapes = list_element_shapes(graph, loop, body_graph)
            body = function_graph(graph.library, loop.attrs["body"].name, shapes, element_shapes)
            tokens: dict[Dim, int] = {}
            seeds = _entry_seeds(graph, loop, dims, lists, tokens)
            body_dims = _induction(body, seeds)
        except (ValueError, TypeError, KeyError, IndexError, tf.errors.OpError):
            continue  # nothing is proven about this loop
        if seeds.empty():
            continue
        found[loop.name] = (loop.attrs["body"].name, seeds)
        by_token = {k: d for d, k in tokens.items()}
        for i, classes in seeds.dims.items():
            ref = loop.inputs[i]
            joins.extend(((loop.name, i, a), (ref.node, ref.index, a)) for a in _marked(classes))
        for i, out in enumerate(loop.outputs):
            if out.dtype == "variant" and _starts_empty(graph, loop.inputs[i]):
                held = _pushed(body, body_dims, i, by_token)
                if held is not None:
                    lists[loop.output(i)] = held
                    joins.extend(_stacked(graph, consumers, loop.output(i), held))
    return found


def mark_body(body: Graph, seeds: Seeds) -> Graph:
    """`body` with its arguments marked (a copy)."""
    out = body.copy()
    for i, ref in enumerate(out.inputs):
        node = out.node(ref.node)
        for attr, classes in (
            (SEED_DIMS, seeds.dims.get(i)),
            (SEED_ELEMENT_DIMS, seeds.elements.get(i)),
            (SEED_ELEMENT_VALUES, seeds.values.get(i, (None, None))[0]),
            (SEED_ELEMENT_SIZES, seeds.values.get(i, (None, None))[1]),
        ):
            node.attrs.pop(attr, None)
            if classes is not None and any(k >= 0 for k in classes):
                node.attrs[attr] = AttrList("i", tuple(classes))
    return out


def _marked(classes: list[int]) -> list[int]:
    return [a for a, k in enumerate(classes) if k >= 0]


def _entry_seeds(
    graph: Graph,
    loop: Node,
    dims: SymbolicDims,
    lists: dict[TensorRef, Elements],
    tokens: dict[Dim, int],
) -> Seeds:
    """The classes the loop's inputs have, numbered (`tokens`: graph class -> number)."""

    def token(d: Dim | None) -> int:
        return NONE if d is None else tokens.setdefault(dims.root(d), len(tokens))

    seeds = Seeds()
    for i, ref in enumerate(loop.inputs):
        info = graph.info(ref)
        if info.dtype != "variant":
            if info.shape is not None:
                seeds.dims[i] = [token(dims.symbol(ref, a)) for a in range(len(info.shape))]
            continue
        held = _list_source(graph, dims, ref, lists)
        if held is None:
            continue
        seeds.elements[i] = [token(d) for d in held.dims]
        if held.values is not None:
            seeds.values[i] = ([token(d) for d, _ in held.values], [s for _, s in held.values])
    return seeds


def _list_source(
    graph: Graph, dims: SymbolicDims, ref: TensorRef, lists: dict[TensorRef, Elements]
) -> Elements | None:
    for _ in range(16):
        if ref in lists:
            return lists[ref]
        node = graph.node(ref.node)
        if node.op == "Identity" and node.inputs:
            ref = node.inputs[0]
            continue
        if node.op == "TensorListFromTensor" and node.inputs:
            rank = graph.info(node.inputs[0]).rank
            if rank is None:
                return None
            rows = node.inputs[0]
            return Elements(tuple(dims.symbol(rows, a) for a in range(1, rank)), None)
        return None
    return None


def _starts_empty(graph: Graph, ref: TensorRef) -> bool:
    """Whether the list a loop takes holds nothing yet (or only slots the body sets): then
    what it returns holds only what the body put in."""
    for _ in range(16):
        node = graph.node(ref.node)
        if node.op == "Identity" and node.inputs:
            ref = node.inputs[0]
            continue
        return node.op in ("EmptyTensorList", "TensorListReserve")
    return False


def _induction(body: Graph, seeds: Seeds) -> SymbolicDims:
    """Unmarks what a trip does not keep, until every mark is kept; the body's classes under
    the marks that hold."""
    while True:
        dims = SymbolicDims(mark_body(body, seeds), proven=True)
        dropped = False
        for i, classes in seeds.dims.items():
            out = body.outputs[i]
            for a in _marked(classes):
                if dims.symbol(out, a) != dims.seed(classes[a]):
                    classes[a] = NONE
                    dropped = True
        for i in list(seeds.elements):
            if not _keeps_elements(body, dims, i, seeds.elements[i]):
                del seeds.elements[i]
                seeds.values.pop(i, None)
                dropped = True
        if not dropped:
            return dims


def _keeps_elements(body: Graph, dims: SymbolicDims, i: int, classes: list[int]) -> bool:
    """Whether every value the list argument `i` holds after a trip has the classes: the list
    it returns is the argument with values popped, or values of those classes pushed or set."""
    ref = body.outputs[i]
    for _ in range(64):
        node = body.node(ref.node)
        if ref == body.inputs[i]:
            return True
        popped = node.op == "TensorListPopBack" and ref.index == 0
        if (node.op == "Identity" or popped) and node.inputs:
            ref = node.inputs[0]
        elif node.op in ("TensorListPushBack", "TensorListSetItem") and len(node.inputs) >= 2:
            value = node.inputs[-1]
            rank = body.info(value).rank
            if rank != len(classes) or any(
                dims.symbol(value, a) != dims.seed(k) for a, k in enumerate(classes) if k >= 0
            ):
                return False
            ref = node.inputs[0]
        else:
            return False
    return False


def _pushed(
    body: Graph, dims: SymbolicDims, index: int, by_token: dict[int, Dim]
) -> Elements | None:
    """What the body pushes (or sets) into the list it returns at `index`, in the graph's
    classes: one kind of value, pushed into the list it took."""
    ref = body.outputs[index]
    values: list[TensorRef] = []
    for _ in range(64):
        node = body.node(ref.node)
        if ref == body.inputs[index]:
            break
        if node.op == "Identity" and node.inputs:
            ref = node.inputs[0]
        elif node.op in ("TensorListPushBack", "TensorListSetItem") and len(node.inputs) >= 2:
            values.append(node.inputs[-1])
            ref = node.inputs[0]
        else:
            return None
    else:
        return None
    if len(values) != 1:
        return None
    value = values[0]
    rank = body.info(value).rank
    if rank is None:
        return None
    seeds = {dims.seed(k): d for k, d in by_token.items()}
    held = tuple(seeds.get(dims.symbol(value, a)) for a in range(rank))  # type: ignore[arg-type]
    return Elements(held, _shape_values(body, dims, value, seeds))


def _shape_values(
    body: Graph, dims: SymbolicDims, value: TensorRef, seeds: dict[Dim, Dim]
) -> tuple[tuple[Dim | None, int], ...] | None:
    """The sizes a shape vector `Shape(t)` holds: t's classes and known sizes."""
    node = body.node(value.node)
    while node.op == "Identity" and node.inputs:
        node = body.node(node.inputs[0].node)
    if node.op != "Shape" or not node.inputs:
        return None
    shape = body.info(node.inputs[0]).shape
    if shape is None:
        return None
    return tuple(
        (None, int(s)) if s is not None else (seeds.get(dims.symbol(node.inputs[0], a)), -1)  # type: ignore[arg-type]
        for a, s in enumerate(shape)
    )


def _stacked(
    graph: Graph, consumers: dict[TensorRef, list[str]], ref: TensorRef, held: Elements
) -> list[tuple[Dim, Dim]]:
    """A stack of the list (`TensorListStack`, read after the loop) has its elements' sizes
    along every axis but the first."""
    joins: list[tuple[Dim, Dim]] = []
    frontier = [ref]
    while frontier:
        r = frontier.pop()
        for name in consumers.get(r, []):
            node = graph.node(name)
            if node.op == "Identity":
                frontier.append(node.output(0))
            elif node.op == "TensorListStack" and node.inputs[0] == r:
                joins.extend(
                    ((node.name, 0, a + 1), d) for a, d in enumerate(held.dims) if d is not None
                )
    return joins


def element_value_classes(node: Node) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A marked list argument's classes and known sizes of the shapes it holds."""
    return seed_classes(node, SEED_ELEMENT_VALUES), seed_classes(node, SEED_ELEMENT_SIZES)
