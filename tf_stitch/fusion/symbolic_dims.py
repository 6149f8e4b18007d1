"""Which unknown sizes the graph proves equal.

Every unknown dimension (None in a TensorInfo) of every tensor starts as its own symbol; the
relations ops imply join symbols (union-find; the rules of each op are in dim_relations.py): an
identity-like op or a whole-axis slice keeps its input's size, a transpose permutes it, a
reduction keeps its kept axes, a matmul its rows and columns, a reshape the axes it leaves
alone, a concatenation its other axes, and an elementwise op makes its operands' aligned
unknown sizes one (as the kernels assume, and check at run time: a size of 1 there, which
TensorFlow would broadcast, is an InvalidArgumentError, never a wrong value). Two unknown sizes
of different symbols, such as the lengths of two unrelated inputs or the outputs of a
DynamicPartition, may differ at run time: a kernel never treats them as one.

`SymbolicDims(graph, proven=True)` assumes nothing: a broadcasting op (elementwise, Select,
BroadcastTo, a batched matmul's batch axes) joins an unknown size of its result only with the
one class its operands' aligned unknown sizes belong to (operands of size 1 broadcast; two
classes could be 1 and n), so that equal symbols are equal sizes in every run TensorFlow
accepts. Graph rewrites that are only correct for equal sizes use these.

A loop body's graph knows nothing of the sizes its arguments had outside: fusion/loop_dims.py
proves which of them stay equal on every trip and marks the arguments (`_ts_dims`, and for
TensorLists `_ts_element_dims` for the values popped or read from them) with shared class
numbers, which join their sizes here as seeds (`seed(k)`); `extra` joins sizes proven elsewhere
(a loop's results with its inputs).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from tf_stitch.fusion import dim_relations
from tf_stitch.fusion.dim_relations import Aligned, Broadcast, Dim
from tf_stitch.graph.ir import Graph, Node, TensorRef

# Marks on a loop body's arguments (fusion/loop_dims.py): per axis, a class number or -1.
SEED_DIMS = "_ts_dims"
SEED_ELEMENT_DIMS = "_ts_element_dims"  # of the values a TensorList argument holds
SEED_ELEMENT_VALUES = "_ts_element_values"  # of the sizes a list of shape vectors holds
SEED_ELEMENT_SIZES = "_ts_element_sizes"  # those sizes where known (-1: unknown)
# The ops that take a value out of a TensorList, and which output it is.
LIST_READS = {"TensorListPopBack": 1, "TensorListGetItem": 0}


class SymbolicDims:
    """`symbol(ref, axis)`: the same value for two unknown dims the graph proves equal (with
    `proven`, without the kernels' assumption that broadcasting ops never broadcast them)."""

    def __init__(
        self, graph: Graph, proven: bool = False, extra: Iterable[tuple[Dim, Dim]] = ()
    ) -> None:
        self.graph = graph
        self._parent: dict[Dim, Dim] = {}
        broadcasts: list[Broadcast] = []
        for a, b in extra:
            self._join(a, b)
        for node in graph:
            for a, b in _seeded(graph, node):
                self._join(a, b)

        def recorded(
            graph: Graph, out: TensorRef, refs: list[TensorRef], axes: range | None = None
        ) -> Iterator[tuple[Dim, Dim]]:
            broadcasts.extend(dim_relations.broadcasts(graph, out, refs, axes))
            return iter(())

        aligned: Aligned = recorded if proven else dim_relations.aligned
        for node in graph.topological_order():
            for a, b in dim_relations.relations(graph, node, aligned):
                self._join(a, b)
        while any([self._join_broadcast(out, operands) for out, operands in broadcasts]):
            pass

    def _join_broadcast(self, out: Dim, operands: list[Dim | int]) -> bool:
        """Joins `out` with its operands' one class of unknown sizes (the others of size 1);
        whether that joined two classes."""
        if any(isinstance(d, int) and d != 1 for d in operands):
            return False
        classes = {self._find(d) for d in operands if not isinstance(d, int)}
        if len(classes) != 1 or self._find(out) in classes:
            return False
        self._join(out, classes.pop())
        return True

    def symbol(self, ref: TensorRef, axis: int) -> Dim | None:
        """The class of the dim (None for a known size)."""
        shape = self.graph.info(ref).shape
        if shape is None or shape[axis] is not None:
            return None
        return self._find((ref.node, ref.index, axis))

    def seed(self, k: int) -> Dim:
        """The class of seed `k` (see SEED_DIMS)."""
        return self._find(seed_dim(k))

    def root(self, d: Dim) -> Dim:
        """The class of `d`, any unknown size of the graph (or a seed)."""
        return self._find(d)

    def symbols(self, ref: TensorRef) -> tuple[Dim | None, ...]:
        shape = self.graph.info(ref).shape or ()
        return tuple(self.symbol(ref, a) for a in range(len(shape)))

    def _find(self, d: Dim) -> Dim:
        root = d
        while self._parent.get(root, root) != root:
            root = self._parent[root]
        while d != root:
            self._parent[d], d = root, self._parent[d]
        return root

    def _join(self, a: Dim, b: Dim) -> None:
        ra, rb = self._find(a), self._find(b)
        if ra != rb:
            self._parent[max(ra, rb)] = min(ra, rb)


def seed_dim(k: int) -> Dim:
    return ("^seed", k, 0)  # (no node is named so)


def seed_classes(node: Node, attr: str) -> tuple[int, ...]:
    value = node.attrs.get(attr)
    return tuple(int(k) for k in getattr(value, "items", ()))


def _seeded(graph: Graph, node: Node) -> Iterator[tuple[Dim, Dim]]:
    """A marked argument's unknown sizes, and those of the values read from a marked list,
    joined with their seeds."""
    if node.op == "Placeholder":
        ref, classes = node.output(0), seed_classes(node, SEED_DIMS)
    elif node.op in LIST_READS and node.inputs and node.inputs[0].node in graph:
        source = graph.node(node.inputs[0].node)
        if source.op != "Placeholder" or len(node.outputs) <= LIST_READS[node.op]:
            return
        ref, classes = node.output(LIST_READS[node.op]), seed_classes(source, SEED_ELEMENT_DIMS)
    else:
        return
    for axis, k in enumerate(classes):
        d = dim_relations.dim(graph, ref, axis)
        if k >= 0 and d is not None:
            yield d, seed_dim(k)
