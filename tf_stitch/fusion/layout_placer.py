"""How a group's layout analysis places each node's tensors on the domain it chose.

`Placer` holds the analysis' state (the domain and split, once layout.py's `_Analysis`, its
subclass, has chosen them; the placements, slices, tiles, gathers and concatenations found so
far) and places each node's tensors in turn: an elementwise op's operands and result in one frame,
a reduction's result in the outer frame (without keepdims), a view where its input's non-trivial
dims already are, a slice or a transpose of a group input as a window read in place, a matmul as
a tile, a gather as rows of its table, a concatenation as parts written where they belong. A
placement that cannot be made raises `LayoutError`. `wrapped_indices` finds the ids a gather's
kernel may wrap itself (Keras' `take`).
"""

from __future__ import annotations

from tf_stitch.fusion.layout_types import (
    FULL,
    OUTER,
    ConcatSink,
    Dims,
    Frame,
    GatherSource,
    LayoutError,
    MatMulTile,
    Placement,
    SliceSource,
    Symbols,
    check_fits,
    data_inputs,
    fmt,
    same_dims,
)
from tf_stitch.fusion.op_kinds import OpKind, op_spec
from tf_stitch.fusion.operand_segments import NotInPlace, OperandReader, Segment, static_product
from tf_stitch.fusion.static_args import slice_window, transpose_perm
from tf_stitch.fusion.symbolic_dims import SymbolicDims
from tf_stitch.graph.ir import Graph, Node, TensorRef
from tf_stitch.graph.values import constant_value, scalar_constant


class Placer:
    """The state of a group's layout analysis, and the placing of each node's tensors."""

    def __init__(
        self, graph: Graph, nodes: list[Node], dims: SymbolicDims, tile_budget: int | None
    ) -> None:
        self.tile_budget = tile_budget
        self.graph = graph
        self.dims = dims
        self.nodes = nodes
        self.names = {n.name for n in nodes}
        self.placements: dict[TensorRef, Placement] = {}
        self.slices: dict[TensorRef, SliceSource] = {}
        self.tiles: dict[TensorRef, MatMulTile] = {}
        self.operands = OperandReader(graph, self.names, graph.fed())
        self.gathers: dict[TensorRef, GatherSource] = {}
        self.concats: dict[TensorRef, ConcatSink] = {}
        # Transposes of values the group computes: written out, never read in the group.
        self.transposed: set[TensorRef] = set()
        self.domain: Dims = ()
        self.domain_symbols: Symbols = ()
        self.split = -1
        # The reductions' kept axes (the outer frame), and the order of the domain's axes in
        # the schedule: kept axes, then reduced ones (the identity for row reductions).
        self.kept: tuple[int, ...] = ()
        self.perm: tuple[int, ...] = ()

    def _constant_everywhere(self, ref: TensorRef) -> bool:
        """A value computed per element that is one scalar for the whole domain (a loss's
        count of elements): the same in every row, so per-row code may read it too."""
        p = self.placements[ref]
        return p.frame == FULL and all(d == 1 for d in p.dims)

    def _computed(self, ref: TensorRef) -> bool:
        """Computed by an op of the group per element (not a group input, not a tile)."""
        return ref.node in self.names and ref not in self.tiles

    # -- placing each node's tensors ---------------------------------------------------------
    def _place_node(self, node: Node) -> None:
        kind = op_spec(node.op).kind
        out = node.output(0)
        if any(r in self.concats for r in data_inputs(node)):
            raise LayoutError(f"{node.name} reads a concatenation its kernel writes")
        if any(r in self.transposed for r in data_inputs(node)):
            raise LayoutError(f"{node.name} reads a transpose of a value its kernel computes")
        if kind is OpKind.REDUCE:
            src = node.inputs[0]
            self._place_operand(src, FULL, node)
            if not same_dims(self.placements[src].dims, self.domain):
                raise LayoutError(
                    f"{node.name} reduces a broadcast tensor {fmt(self.placements[src].dims)}"
                )
            self.placements[out] = self._place(out, FULL if keep_dims(node) else OUTER)
        elif kind is OpKind.RESHAPE:
            self._place_view(node)
        elif kind is OpKind.SLICE:
            self._place_slice(node)
        elif kind is OpKind.TRANSPOSE:
            self._place_transpose(node)
        elif kind is OpKind.MATMUL:
            self._place_matmul(node)
        elif kind is OpKind.GATHER:
            self._place_gather(node)
        elif kind is OpKind.CONCAT:
            self._place_concat(node)
        elif kind is OpKind.BROADCAST:
            self._place_operand(node.inputs[0], FULL, node)
            self.placements[out] = self._place(out, FULL)
        else:
            frames = {
                self.placements[r].frame
                for r in node.inputs
                if self._computed(r) and not self._constant_everywhere(r)
            }
            if len(frames) > 1:
                raise LayoutError(f"{node.name} mixes per-row and per-element operands")
            frame = frames.pop() if frames else FULL
            for ref in node.inputs:
                self._place_operand(ref, frame, node)
            self.placements[out] = self._place(out, frame)

    def _place_transpose(self, node: Node) -> None:
        """A transpose of a group input is a view of it with permuted strides (like a window
        of it); a transpose of a computed value permutes that value's placement (the kernel
        writes it with permuted strides)."""
        src, out = node.inputs[0], node.output(0)
        perm = transpose_perm(self.graph, node)
        assert perm is not None  # node legality checked it
        if src.node in self.names:
            p = self.placements.get(src)
            if not self._computed(src) or p is None or p.frame != FULL:
                raise LayoutError(f"{node.name} transposes a matmul result or a per-row value")
            dims = tuple(p.dims[i] for i in perm)
            self.placements[out] = Placement(FULL, dims, tuple(p.axes[i] for i in perm))
            self.transposed.add(out)
            return
        placement = self._place(out, FULL)
        axes = [0] * len(perm)
        for j, i in enumerate(perm):
            axes[i] = placement.axes[j]
        dims = tuple(self.graph.info(src).shape or ())
        self.placements[out] = placement
        self.slices[out] = SliceSource(src, dims, (0,) * len(dims), tuple(axes), dims)

    def _place_concat(self, node: Node) -> None:
        parts = tuple(node.inputs[:-1])
        for ref in parts:
            self._place_operand(ref, FULL, node)
        placements = {self.placements[r] for r in parts}
        if len(placements) != 1:
            raise LayoutError(f"{node.name}: its parts are placed differently")
        shape = tuple(self.graph.info(parts[0]).shape or ())
        axis = constant_value(self.graph, node.inputs[-1])
        assert axis is not None and shape  # concat_legality checked them
        width = static_product(shape[int(axis) % len(shape) :]) or 0
        self.concats[node.output(0)] = ConcatSink(parts, int(width))

    def _place_gather(self, node: Node) -> None:
        table, indices = node.inputs[:2]
        rows = int((self.graph.info(table).shape or (0,))[0] or 0)
        raw = wrapped_indices(self.graph, indices, rows)
        indices = raw or indices
        for ref in (table, indices):
            if ref.node in self.names:
                raise LayoutError(f"{node.name}: {ref} is computed in the group")
        shape = tuple(self.graph.info(table).shape or ())
        index_dims = tuple(self.graph.info(indices).shape or ())
        if len(shape) < 2:
            raise LayoutError(f"{node.name}: gathers of scalars are not rows")
        out = node.output(0)
        placement = self._place(out, FULL)
        self.placements[out] = placement
        index_axes = placement.axes[: len(index_dims)]
        self._record_external(indices, Placement(FULL, index_dims, index_axes))
        row = static_product(shape[1:]) or 0
        self.gathers[out] = GatherSource(table, indices, rows, row, raw is not None)

    def _place_matmul(self, node: Node) -> None:
        a, b = node.inputs[:2]
        for ref in (a, b):
            if ref.node in self.names:
                raise LayoutError(
                    f"{node.name}: operand {ref} is computed in the group; a matmul's operands "
                    "must be complete before its kernel starts"
                )
        k, n = self.graph.info(b).shape or (None, None)
        assert k is not None and n is not None  # node legality checked it
        shape = self.graph.info(a).shape or (None,)
        if len(shape) > 2:  # a BatchMatMulV2 by a matrix: rows of all leading dims, read whole
            segments: tuple[Segment, ...] = (Segment(a, 0, k, k),)
        else:
            try:
                segments = tuple(self.operands.segments(a, shape[0]))
            except NotInPlace as e:
                raise LayoutError(f"{node.name}: {e}") from e
        if sum(s.width for s in segments) != k:
            raise LayoutError(f"{node.name}: its left operand's columns are not read in place")
        tile = MatMulTile(node.name, a, b, k, n, segments, len(shape) - 1)
        self.tiles[node.output(0)] = tile
        right = {t.b: t.k * t.n * 4 for t in self.tiles.values()}
        if self.tile_budget is not None and sum(right.values()) > self.tile_budget:
            raise LayoutError(
                f"{node.name}: the kernel's matmul tiles would read {sum(right.values())} B of "
                f"right operands each time, more than {self.tile_budget} B (in a loop's body): "
                "library calls do it faster"
            )

    def _place_operand(self, ref: TensorRef, frame: Frame, user: Node) -> None:
        if self._computed(ref):
            if self.placements[ref].frame != frame and not self._constant_everywhere(ref):
                raise LayoutError(f"{user.name} mixes per-row and per-element operands")
            return
        self._record_external(ref, self._place(ref, frame))

    def _record_external(self, ref: TensorRef, placement: Placement) -> None:
        old = self.placements.get(ref)
        if old is not None and old != placement:
            raise LayoutError(f"{ref} is read both per row and per element")
        self.placements[ref] = placement

    def _place_slice(self, node: Node) -> None:
        src, out = node.inputs[0], node.output(0)
        if self._computed(src):
            raise LayoutError(f"{node.name} slices a value computed in the group")
        begin = slice_window(self.graph, node)
        assert begin is not None  # node legality checked it
        source = tuple(self.graph.info(src).shape or ())
        window = tuple(self.graph.info(out).shape or ())
        kept = [
            i
            for i, (s, w) in enumerate(zip(source, window, strict=True))
            if not (w == 1 and s != 1)
        ]
        symbols = self.dims.symbols(out)
        placement = self._place_dims(
            out, tuple(window[i] for i in kept), FULL, tuple(symbols[i] for i in kept)
        )
        axes = [-1] * len(source)
        for i, axis in zip(kept, placement.axes, strict=True):
            axes[i] = axis
        self.placements[out] = placement
        self.slices[out] = SliceSource(src, source, begin, tuple(axes), window)

    def _place_view(self, node: Node) -> None:
        src, out = node.inputs[0], node.output(0)
        if self._computed(src):
            sources = [self.placements[src]]
        else:
            sources = [p for p in (self._try_place(src, FULL), self._try_place(src, OUTER)) if p]
        for placed in sources:
            for frame in (placed.frame, FULL, OUTER):
                candidate = self._try_place(out, frame)
                if candidate and _nontrivial(candidate) == _nontrivial(placed):
                    if not self._computed(src):
                        self._record_external(src, placed)
                    self.placements[out] = candidate
                    return
        raise LayoutError(f"{node.name} ({node.op}) changes the data layout; not a free view here")

    def _try_place(self, ref: TensorRef, frame: Frame) -> Placement | None:
        try:
            return self._place(ref, frame)
        except LayoutError:
            return None

    def _place(self, ref: TensorRef, frame: Frame) -> Placement:
        dims = self.graph.info(ref).shape
        assert dims is not None
        return self._place_dims(ref, tuple(dims), frame, self.dims.symbols(ref))

    def _place_dims(self, ref: TensorRef, dims: Dims, frame: Frame, symbols: Symbols) -> Placement:
        if frame == OUTER and self.split < 0:
            raise LayoutError(f"{ref}: no outer frame in an elementwise group")
        frame_axes = self.kept if frame == OUTER else tuple(range(len(self.domain)))
        width = len(frame_axes)
        if len(dims) > width:
            raise LayoutError(f"{ref} has rank {len(dims)}, more than the {frame} frame's {width}")
        axes = frame_axes[width - len(dims) :]
        for d, a, symbol in zip(dims, axes, symbols, strict=True):
            check_fits(ref, d, self.domain[a])
            if d is None and symbol != self.domain_symbols[a]:
                raise LayoutError(
                    f"{ref}: its unknown size on axis {a} is not proven equal to the others there"
                )
        return Placement(frame, tuple(dims), axes)


def keep_dims(node: Node) -> bool:
    return bool(node.attrs.get("keep_dims", False))


def _nontrivial(p: Placement) -> list[tuple[int, int | None]]:
    return [(a, d) for a, d in zip(p.axes, p.dims, strict=True) if d != 1]


def wrapped_indices(graph: Graph, indices: TensorRef, rows: int) -> TensorRef | None:
    """The ids `indices` wraps as Keras' `take` does, `where(ids < 0, ids + rows, ids)`, where
    `rows` is the table's (so a kernel that gathers may read the ids and wrap them itself);
    else None."""
    select = graph.nodes.get(indices.node)
    if select is None or select.op not in ("Select", "SelectV2") or len(select.inputs) != 3:
        return None
    cond, shifted, ids = (graph.nodes.get(r.node) for r in select.inputs)
    if cond is None or shifted is None or ids is None or not rows:
        return None
    raw = select.inputs[2]
    if cond.op != "Less" or cond.inputs[0] != raw or scalar_constant(graph, cond.inputs[1]) != 0:
        return None
    if shifted.op not in ("Add", "AddV2") or raw not in shifted.inputs:
        return None
    other = shifted.inputs[1] if shifted.inputs[0] == raw else shifted.inputs[0]
    if scalar_constant(graph, other) != rows or graph.info(raw).shape != graph.info(indices).shape:
        return None
    return raw if graph.info(raw).dtype in ("int32", "int64") else None
