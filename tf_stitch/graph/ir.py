"""The small typed graph every pass shares.

A `Graph` is an ordered dict of `Node`s plus the feed/fetch set. Tensors are named by
`TensorRef(node, index)`; shapes are tuples whose entries are ints or `None` (unknown), or `None`
for an unknown rank. Nothing here knows about protobuf: `tf_stitch.graph.io` converts.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

Shape = tuple[int | None, ...] | None
# A lowered loop's back edge runs from a NextIteration to the Merge at the top of the loop.
MERGE_OPS = frozenset({"Merge", "RefMerge"})
NEXT_ITERATION_OPS = frozenset({"NextIteration", "RefNextIteration"})


class TensorRef(NamedTuple):
    """Output `index` of node `node`; `str()` gives TensorFlow's `name:index` spelling."""

    node: str
    index: int = 0  # type: ignore[assignment]  # (shadows tuple.index, deliberately)

    def __str__(self) -> str:
        return f"{self.node}:{self.index}"

    @staticmethod
    def parse(name: str) -> TensorRef:
        """Parses `node`, `node:1` (a leading `^` is not accepted: control inputs are separate)."""
        if not name or name.startswith("^"):
            raise ValueError(f"not a tensor name: {name!r}")
        node, sep, idx = name.rpartition(":")
        if sep and idx.isdigit():
            return TensorRef(node, int(idx))
        return TensorRef(name, 0)


@dataclass(frozen=True)
class TensorInfo:
    """The static type of one tensor: a dtype name ("float32", "bool", ...) and a shape."""

    dtype: str
    shape: Shape

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def fully_defined(self) -> bool:
        return self.shape is not None and all(d is not None for d in self.shape)

    def num_elements(self) -> int | None:
        if not self.fully_defined():
            return None
        n = 1
        for d in self.shape or ():
            n *= int(d or 0)
        return n


@dataclass(frozen=True)
class DType:
    """A `type` attribute value (the dtype name); kept apart from plain strings on purpose."""

    name: str


# The integer dtypes, signed and unsigned.
INT_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})

# Bytes of one element, by dtype name (TensorFlow's and C's).
DTYPE_BYTES = {
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "half": 2,
    "float": 4,
    "double": 8,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "bool": 1,
    "complex64": 8,
    "complex128": 16,
}


@dataclass(frozen=True)
class TensorValue:
    """A `tensor` attribute value: a numpy array and its TensorFlow dtype name."""

    array: Any
    dtype: str


@dataclass(frozen=True)
class FuncRef:
    """A `func` attribute value."""

    name: str
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ShapeValue:
    """A `shape` attribute value."""

    dims: Shape


@dataclass(frozen=True)
class AttrList:
    """A `list(...)` attribute value; `kind` keeps the element kind so empty lists round-trip."""

    kind: str
    items: tuple[Any, ...]


@dataclass(frozen=True)
class RawAttr:
    """An attribute kind the IR does not model, kept as its serialized `AttrValue` bytes."""

    data: bytes


@dataclass
class Node:
    """One operation. `inputs` are data inputs; `control_inputs` are node names."""

    name: str
    op: str
    inputs: list[TensorRef] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    outputs: list[TensorInfo] = field(default_factory=list)
    control_inputs: list[str] = field(default_factory=list)
    device: str = ""

    def output(self, index: int = 0) -> TensorRef:
        return TensorRef(self.name, index)

    def copy(self) -> Node:
        return Node(
            self.name,
            self.op,
            list(self.inputs),
            dict(self.attrs),
            list(self.outputs),
            list(self.control_inputs),
            self.device,
        )


@dataclass
class Graph:
    """Nodes in insertion order plus what the graph is fed and must produce.

    `inputs` are the feeds, `outputs` the fetched tensors, `targets` nodes kept for their effect.
    `library` and `versions` are carried through untouched (serialized protobuf bytes).
    """

    nodes: dict[str, Node] = field(default_factory=dict)
    inputs: list[TensorRef] = field(default_factory=list)
    outputs: list[TensorRef] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    library: bytes = b""
    versions: bytes = b""

    # -- access ------------------------------------------------------------------------------
    def __contains__(self, name: object) -> bool:
        return name in self.nodes

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, name: str) -> Node:
        try:
            return self.nodes[name]
        except KeyError:
            raise KeyError(f"no node named {name!r}") from None

    def info(self, ref: TensorRef) -> TensorInfo:
        node = self.node(ref.node)
        if ref.index >= len(node.outputs):
            raise KeyError(f"{node.op} node {node.name!r} has no output {ref.index}")
        return node.outputs[ref.index]

    def producer(self, ref: TensorRef) -> Node:
        return self.node(ref.node)

    def consumers(self) -> dict[TensorRef, list[str]]:
        """Map from each consumed tensor to the names of the nodes that read it."""
        users: dict[TensorRef, list[str]] = {}
        for node in self.nodes.values():
            for ref in node.inputs:
                users.setdefault(ref, []).append(node.name)
        return users

    def control_consumers(self) -> dict[str, list[str]]:
        users: dict[str, list[str]] = {}
        for node in self.nodes.values():
            for src in node.control_inputs:
                users.setdefault(src, []).append(node.name)
        return users

    def predecessors(self, node: Node) -> set[str]:
        """The nodes `node` waits for in one iteration: its data and control inputs, less a
        loop's back edge (a NextIteration into a Merge, as TensorFlow's executor orders them)."""
        preds = {r.node for r in node.inputs} | set(node.control_inputs)
        if node.op in MERGE_OPS:
            back = {p for p in preds if p in self.nodes and self.nodes[p].op in NEXT_ITERATION_OPS}
            preds -= back
        return preds

    def topological_order(self) -> list[Node]:
        """Nodes with every producer (data or control) before its consumers, otherwise in
        insertion order; loops' back edges do not count. Raises ValueError naming a node on a
        cycle or a missing input."""
        position = {name: i for i, name in enumerate(self.nodes)}
        indegree: dict[str, int] = {}
        succ: dict[str, list[str]] = {name: [] for name in self.nodes}
        for node in self.nodes.values():
            preds = self.predecessors(node)
            for p in preds:
                if p not in self.nodes:
                    raise ValueError(f"node {node.name!r} reads {p!r}, which is not in the graph")
                succ[p].append(node.name)
            indegree[node.name] = len(preds)
        heap = [(position[n], n) for n, d in indegree.items() if d == 0]
        heapq.heapify(heap)
        order: list[Node] = []
        while heap:
            _, name = heapq.heappop(heap)
            order.append(self.nodes[name])
            for s in succ[name]:
                indegree[s] -= 1
                if indegree[s] == 0:
                    heapq.heappush(heap, (position[s], s))
        if len(order) != len(self.nodes):
            stuck = sorted(n for n, d in indegree.items() if d > 0)
            raise ValueError(f"the graph has a cycle through {stuck[0]!r}")
        return order

    # -- edits (passes copy first, then edit their copy) --------------------------------------
    def copy(self) -> Graph:
        return Graph(
            {n: node.copy() for n, node in self.nodes.items()},
            list(self.inputs),
            list(self.outputs),
            list(self.targets),
            self.library,
            self.versions,
        )

    def deepcopy(self) -> Graph:
        return copy.deepcopy(self)

    def add(self, node: Node) -> Node:
        if node.name in self.nodes:
            raise ValueError(f"a node named {node.name!r} already exists")
        self.nodes[node.name] = node
        return node

    def remove(self, names: Iterable[str]) -> None:
        for name in names:
            del self.nodes[name]

    def unique_name(self, base: str) -> str:
        if base not in self.nodes:
            return base
        i = 1
        while f"{base}_{i}" in self.nodes:
            i += 1
        return f"{base}_{i}"

    def replace_uses(self, old: TensorRef, new: TensorRef) -> None:
        """Points every reader of `old` (and the fetch list) at `new`."""
        for node in self.nodes.values():
            if old in node.inputs:
                node.inputs = [new if r == old else r for r in node.inputs]
        self.outputs = [new if r == old else r for r in self.outputs]

    def fed(self) -> set[TensorRef]:
        return set(self.inputs)

    def fetched(self) -> set[TensorRef]:
        return set(self.outputs)
