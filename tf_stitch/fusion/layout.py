"""Where every tensor of a candidate group lives in the group's iteration domain.

A group iterates over one *domain* (a shape). Axes `[0, split)` are outer: each unit of work
(a row) is one point of them. Axes `[split, rank)` are inner: a row loops over them. Row
reductions reduce exactly the inner axes. Each tensor is *placed* in the domain: dimension `i`
of the tensor maps to domain axis `axes[i]`; a size-1 dimension on a larger axis broadcasts.
Tensors live in the `full` frame (right-aligned to the whole domain, numpy style) or, for the
results of reductions without keepdims, in the `outer` frame (right-aligned to the outer axes).

A reduction over outer axes (a *column* reduction: batch statistics over N,H,W of an NHWC
tensor, a sum over time of [B,T,H]) gets a `column` layout: the domain's axes are reordered so
that the kept axes come first (one unit per kept point) and the reduced axes last (the unit's
loop, strided in memory). Placements then map a tensor's dims to the reordered axes.

A small MatMul in the group is a *tile*: computed per block of rows from two group inputs before
the block's rows run, then read by the group like an input (directly or through slices). Its
rows must be the domain's rows, so a block computes exactly the rows it needs.

Unknown sizes (None) are allowed where every tensor on that axis is unknown too, and the graph
proves them equal (`symbolic_dims.py`): the kernel binds them at run time and checks that they
agree. Unknown sizes the graph does not relate (two inputs of unrelated lengths) may differ, so
they never share an axis.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from tf_stitch.fusion.cost_model import PERIODIC_ROW_ELEMENTS, choose_loop_split
from tf_stitch.fusion.decision import Decision, forbid
from tf_stitch.fusion.op_kinds import OpKind, op_spec
from tf_stitch.fusion.operand_segments import NotInPlace, OperandReader, Segment, static_product
from tf_stitch.fusion.static_args import reduction_axes, slice_window, transpose_perm
from tf_stitch.fusion.symbolic_dims import Dim, SymbolicDims
from tf_stitch.graph.ir import Graph, Node, TensorRef
from tf_stitch.graph.values import constant_value, scalar_constant

Dims = tuple[int | None, ...]
Symbols = tuple[Dim | None, ...]  # the symbol of each unknown size (None where it is known)
FULL = "full"
OUTER = "outer"


@dataclass(frozen=True)
class Placement:
    frame: str
    dims: Dims
    axes: tuple[int, ...]

    def broadcast_axes(self, domain: Dims) -> set[int]:
        """Domain axes this tensor does not vary along."""
        varying = {a for a, d in zip(self.axes, self.dims, strict=True) if d != 1}
        return {a for a in range(len(domain)) if a not in varying or domain[a] == 1}


@dataclass(frozen=True)
class SliceSource:
    """Where a Slice in the group reads from: a group input, its shape, the window's begin,
    and the domain axis of each of its dims (-1 for a dim the window cuts to one element: the
    slice is placed without it, so `x[:, t]`-style windows need no reshape around them)."""

    tensor: TensorRef
    dims: Dims
    begin: tuple[int, ...]
    axes: tuple[int, ...]
    window: Dims


@dataclass(frozen=True)
class MatMulTile:
    """A MatMul computed per block of rows: `a` [M, k] @ `b` [k, n], both group inputs. The
    left operand is read as `segments` (their widths sum to k): through the concatenations
    along columns, slices and views that built it, which then need not run."""

    node: str
    a: TensorRef
    b: TensorRef
    k: int
    n: int
    segments: tuple[Segment, ...]
    row_dims: int = 1  # dims of the result that are rows (a BatchMatMulV2's [B, T, n]: 2)


@dataclass(frozen=True)
class GatherSource:
    """A GatherV2 in the group: each unit of work reads one row of `table` (the inner axes),
    the row that `indices` (placed on the outer axes) names."""

    table: TensorRef
    indices: TensorRef
    rows: int  # the table's rows (indices must be in [0, rows))
    row_elements: int
    # `indices` are the raw ids of Keras' `take`, which adds `rows` to negative ones first
    # (where(ids < 0, ids + rows, ids)): the kernel wraps them itself
    wrap: bool = False


@dataclass(frozen=True)
class ConcatSink:
    """A ConcatV2 of equal parts: the kernel writes part k at offset k * width (the elements
    of a part from the concatenation's axis on) from each element's place in the output;
    nothing in the kernel reads the concatenation."""

    parts: tuple[TensorRef, ...]
    width: int


@dataclass
class Layout:
    domain: Dims
    split: int
    kind: str  # "row" / "column" (reductions over inner / outer axes) or "loop" (elementwise)
    placements: dict[TensorRef, Placement] = field(default_factory=dict)
    # Slice outputs of the group: read in place from their (external) source tensor.
    slices: dict[TensorRef, SliceSource] = field(default_factory=dict)
    # MatMul outputs computed per block of rows into on-chip tiles.
    tiles: dict[TensorRef, MatMulTile] = field(default_factory=dict)
    # GatherV2 outputs, read from their table's rows.
    gathers: dict[TensorRef, GatherSource] = field(default_factory=dict)
    # ConcatV2 outputs, written part by part.
    concats: dict[TensorRef, ConcatSink] = field(default_factory=dict)

    @property
    def rank(self) -> int:
        return len(self.domain)

    @property
    def inner(self) -> Dims:
        return self.domain[self.split :]

    def is_row_level(self, ref: TensorRef) -> bool:
        """True if the value is one scalar per row (it does not vary along inner axes)."""
        p = self.placements[ref]
        if p.frame == OUTER:
            return True
        inner_axes = set(range(self.split, self.rank))
        return inner_axes <= p.broadcast_axes(self.domain)


class LayoutError(Exception):
    """Raised inside the analysis; turned into a forbid decision at the boundary."""


def data_inputs(node: Node) -> list[TensorRef]:
    spec = op_spec(node.op)
    if spec.kind is OpKind.ELEMENTWISE:
        return list(node.inputs)
    if spec.kind is OpKind.CONCAT:
        return list(node.inputs[:-1])
    return list(node.inputs[: spec.data_inputs])


def keep_dims(node: Node) -> bool:
    return bool(node.attrs.get("keep_dims", False))


def analyze(
    graph: Graph,
    members: Iterable[str],
    order: dict[str, int],
    dims: SymbolicDims | None = None,
    tile_budget: int | None = None,
) -> Layout | Decision:
    """The layout of the group `members`, or a forbid decision saying why it has none.
    `dims` relates the graph's unknown sizes (computed here if not given); `tile_budget` bounds
    the bytes of the right operands of the group's matmul tiles together (None: no bound)."""
    nodes = sorted((graph.node(n) for n in members), key=lambda n: order[n.name])
    try:
        return _Analysis(graph, nodes, dims or SymbolicDims(graph), tile_budget).run()
    except LayoutError as e:
        return forbid(str(e))


class _Analysis:
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

    def run(self) -> Layout:
        reductions = [n for n in self.nodes if op_spec(n.op).kind is OpKind.REDUCE]
        self.domain, self.split = self._domain(reductions)
        for node in self.nodes:
            self._place_node(node)
        tile_row = self._tile_row_axis()
        tile_split = None if tile_row is None else tile_row + 1
        splits = {tile_split, self._gather_split()} - {None}
        if len(splits) > 1:
            raise LayoutError("matmul rows and gathered rows need different units of work")
        forced = splits.pop() if splits else None
        if reductions and self.perm != tuple(range(len(self.domain))):
            if self.tiles or self.gathers:
                raise LayoutError(
                    f"a matmul or gather with a reduction over outer axes "
                    f"{[a for a in self.perm[self.split :]]} (units would not be its rows)"
                )
            return self._permuted(self.perm)
        kind, split = ("row", self.split) if reductions else ("loop", len(self.domain))
        layout = Layout(self.domain, split, kind, self.placements, self.slices, self.tiles)
        layout.gathers = self.gathers
        layout.concats = self.concats
        if reductions:
            if forced is not None and forced != self.split:
                raise LayoutError(
                    "the rows of a matmul or gather are not the rows of the reduction"
                )
            return layout
        reads = [r for r in self.placements if not self._computed(r)] + list(self.slices)
        op_cost = sum(op_spec(n.op).cost for n in self.nodes)
        if forced is None:
            layout.split = choose_loop_split(self.domain, valid_loop_splits(layout, reads), op_cost)
        else:
            layout.split = forced
        return layout

    def _permuted(self, perm: tuple[int, ...]) -> Layout:
        """The `column` layout: the domain's axes reordered so that the reductions' kept axes
        are the units and the reduced (outer) axes are each unit's loop; every placement
        follows its axes to their new positions."""
        position = {a: i for i, a in enumerate(perm)}

        def move(axes: tuple[int, ...]) -> tuple[int, ...]:
            return tuple(position[a] if a >= 0 else -1 for a in axes)

        domain = tuple(self.domain[a] for a in perm)
        layout = Layout(domain, self.split, "column")
        layout.placements = {
            r: Placement(p.frame, p.dims, move(p.axes)) for r, p in self.placements.items()
        }
        layout.slices = {
            r: SliceSource(s.tensor, s.dims, s.begin, move(s.axes), s.window)
            for r, s in self.slices.items()
        }
        layout.concats = self.concats
        return layout

    def _gather_split(self) -> int | None:
        """The split every gather needs: its table row spans exactly the inner axes."""
        splits: set[int] = set()
        for ref, gather in self.gathers.items():
            p = self.placements[ref]
            n_index = len(p.dims) - (len(self.graph.info(gather.table).shape or ()) - 1)
            value_axes = p.axes[n_index:]
            split = value_axes[0]
            if value_axes != tuple(range(split, len(self.domain))):
                raise LayoutError(f"{ref.node}: a gathered row is not the inner axes")
            if any(d != 1 for d in self.domain[: len(self.domain) - len(p.dims)]):
                raise LayoutError(f"{ref.node}: gathered rows broadcast over other axes")
            splits.add(split)
        if len(splits) > 1:
            raise LayoutError("gathers with different row lengths")
        return splits.pop() if splits else None

    def _constant_everywhere(self, ref: TensorRef) -> bool:
        """A value computed per element that is one scalar for the whole domain (a loss's
        count of elements): the same in every row, so per-row code may read it too."""
        p = self.placements[ref]
        return p.frame == FULL and all(d == 1 for d in p.dims)

    def _computed(self, ref: TensorRef) -> bool:
        """Computed by an op of the group per element (not a group input, not a tile)."""
        return ref.node in self.names and ref not in self.tiles

    def _tile_row_axis(self) -> int | None:
        """The last domain axis of every tile's rows. A tile's row dims must be consecutive
        domain axes, whole, after only axes of size 1: then unit r is row r of the tile."""
        rows: set[int] = set()
        for ref, tile in self.tiles.items():
            reads: list[tuple[tuple[int, ...], Dims, Dims]] = []
            if ref in self.placements:
                p = self.placements[ref]
                reads.append((p.axes, p.dims, p.dims))
            reads += [(s.axes, s.dims, s.window) for s in self.slices.values() if s.tensor == ref]
            if not reads:
                raise LayoutError(f"{tile.node}: its result is not read in the group")
            for axes, dims, window in reads:
                row_axes = axes[: tile.row_dims]
                first = row_axes[0] if row_axes else -1
                if (
                    len(axes) != tile.row_dims + 1
                    or window[: tile.row_dims] != dims[: tile.row_dims]
                    or first < 0
                    or row_axes != tuple(range(first, first + tile.row_dims))
                ):
                    raise LayoutError(f"{tile.node}: its rows are not the rows of the domain")
                if any(d != 1 for d in self.domain[:first]):
                    raise LayoutError(f"{tile.node}: the domain has more outer axes than its rows")
                for a, d in zip(row_axes, dims, strict=False):
                    if d == 1 and self.domain[a] != 1:
                        raise LayoutError(f"{tile.node}: a one-row matmul broadcast over rows")
                if axes[-1] in row_axes:
                    raise LayoutError(f"{tile.node}: rows and columns on one axis")
                rows.add(row_axes[-1])
        if len(rows) > 1:
            raise LayoutError("matmuls with rows on different axes")
        return rows.pop() if rows else None

    # -- the domain --------------------------------------------------------------------------
    def _domain(self, reductions: list[Node]) -> tuple[Dims, int]:
        for node in self.nodes:
            for ref in node.inputs[:1] + [node.output(i) for i in range(len(node.outputs))]:
                if self.graph.info(ref).shape is None:
                    raise LayoutError(f"{ref} has an unknown rank")
        if not reductions:
            shapes = [
                (ref, *self._domain_shape(node, ref))
                for node in self.nodes
                if op_spec(node.op).kind not in (OpKind.RESHAPE, OpKind.MATMUL)
                for ref in _read_inputs(node) + self._shaping_outputs(node)
            ]
            domain, self.domain_symbols = broadcast_all(shapes)
            return domain, -1
        first = reductions[0]
        domain = self.graph.info(first.inputs[0]).shape or ()
        self.domain_symbols = self.dims.symbols(first.inputs[0])
        axes = reduction_axes(self.graph, first)
        for red in reductions:
            shape = self.graph.info(red.inputs[0]).shape or ()
            r_axes = reduction_axes(self.graph, red)
            if r_axes is None:
                raise LayoutError(f"{red.name}: reduction axes are not constant")
            if not r_axes:
                raise LayoutError(f"{red.name} reduces no axis")
            if r_axes != axes or not _same_dims(shape, domain):
                raise LayoutError(
                    f"{red.name} reduces axes {list(r_axes)} of {fmt(shape)} but "
                    f"{first.name} axes {list(axes or ())} of {fmt(domain)}"
                )
            if self.dims.symbols(red.inputs[0]) != self.domain_symbols:
                raise LayoutError(
                    f"{red.name} and {first.name} reduce tensors whose unknown sizes "
                    "the graph does not prove equal"
                )
        reduced = set(axes or ())
        self.kept = tuple(a for a in range(len(domain)) if a not in reduced)
        self.perm = self.kept + tuple(sorted(reduced))
        return tuple(domain), len(self.kept)

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
            if not _same_dims(self.placements[src].dims, self.domain):
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

    def _shaping_outputs(self, node: Node) -> list[TensorRef]:
        """The outputs whose shapes take part in the domain: not a concatenation (its parts
        do), nor the transpose of a computed value (its input does)."""
        kind = op_spec(node.op).kind
        if kind is OpKind.CONCAT:
            return []
        if kind is OpKind.TRANSPOSE and node.inputs[0].node in self.names:
            return []
        return [node.output(0)]

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

    def _place_operand(self, ref: TensorRef, frame: str, user: Node) -> None:
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

    def _try_place(self, ref: TensorRef, frame: str) -> Placement | None:
        try:
            return self._place(ref, frame)
        except LayoutError:
            return None

    def _place(self, ref: TensorRef, frame: str) -> Placement:
        dims = self.graph.info(ref).shape
        assert dims is not None
        return self._place_dims(ref, tuple(dims), frame, self.dims.symbols(ref))

    def _domain_shape(self, node: Node, ref: TensorRef) -> tuple[Dims, Symbols]:
        """The shape a tensor contributes to the domain, and its sizes' symbols: a slice's
        window without the dims it cuts to a single element."""
        shape = tuple(self.graph.info(ref).shape or ())
        symbols = self.dims.symbols(ref)
        if op_spec(node.op).kind is OpKind.SLICE and ref == node.output(0):
            source = self.graph.info(node.inputs[0]).shape or ()
            pairs = enumerate(zip(source, shape, strict=True))
            kept = [i for i, (s, w) in pairs if w != 1 or s == 1]
            return tuple(shape[i] for i in kept), tuple(symbols[i] for i in kept)
        return shape, symbols

    def _place_dims(self, ref: TensorRef, dims: Dims, frame: str, symbols: Symbols) -> Placement:
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


def check_fits(ref: TensorRef, dim: int | None, axis: int | None) -> None:
    if dim == 1 or dim == axis:
        return
    raise LayoutError(
        f"{ref}: a dimension of size {_d(dim)} does not fit a domain axis of {_d(axis)}"
    )


def _read_inputs(node: Node) -> list[TensorRef]:
    """The inputs whose shapes take part in the domain (a slice's or a transpose's source, a
    gather's table and indices do not)."""
    kinds = (OpKind.SLICE, OpKind.GATHER, OpKind.TRANSPOSE)
    return [] if op_spec(node.op).kind in kinds else data_inputs(node)


def broadcast_all(shapes: list[tuple[TensorRef, Dims, Symbols]]) -> tuple[Dims, Symbols]:
    """numpy broadcasting of all shapes, and the symbols of the unknown sizes; an unknown size
    meets only 1 or unknown sizes of its own symbol."""
    rank = max((len(s) for _, s, _ in shapes), default=0)
    out: list[int | None] = [1] * rank
    symbols: list[Dim | None] = [None] * rank
    known_from: list[TensorRef | None] = [None] * rank
    for ref, shape, shape_symbols in shapes:
        for i, (d, symbol) in enumerate(zip(shape, shape_symbols, strict=True)):
            a = rank - len(shape) + i
            if d == 1 or (d == out[a] and symbol == symbols[a]):
                continue
            if out[a] == 1:
                out[a], symbols[a], known_from[a] = d, symbol, ref
                continue
            if d is None and out[a] is None:
                raise LayoutError(
                    f"{ref} and {known_from[a]} have unknown sizes the graph does not prove equal"
                )
            raise LayoutError(
                f"{ref} has size {_d(d)} where {known_from[a]} has {_d(out[a])}: "
                + ("the broadcast is ambiguous" if None in (d, out[a]) else "they do not broadcast")
            )
    return tuple(out), tuple(symbols)


def valid_loop_splits(layout: Layout, inputs: list[TensorRef]) -> list[int]:
    """The splits of an elementwise group at which every input (or window of an input) reads
    its row contiguously, not at all, or periodically (the cost model chooses among them)."""
    return [
        split
        for split in range(layout.rank + 1)
        if all(
            _inner_access(layout.placements[r], layout.domain, split, _cut_axes(layout, r))
            != "general"
            for r in inputs
        )
    ]


def _cut_axes(layout: Layout, ref: TensorRef) -> set[int]:
    """Domain axes whose neighbour before them is farther apart in memory than a row-major
    window would be: axes along which the window is narrower than its source, and the axis
    after a source dim the window drops (`x[:, t]` of [B,T,H]: B's rows are T*H apart)."""
    source = layout.slices.get(ref)
    if source is None:
        return set()
    kept = [a for a in source.axes if a >= 0]
    if kept != sorted(kept):  # a transpose: its strides are out of order
        return set(kept)
    cut: set[int] = set()
    dropped = False
    for a, w, s in zip(source.axes, source.window, source.dims, strict=True):
        if a < 0:
            dropped = dropped or s != 1
            continue
        if w != s or dropped:
            cut.add(a)
        dropped = False
    return cut


def _inner_access(p: Placement, domain: Dims, split: int, cut: set[int]) -> str:
    """How a unit reads an input along its row: `zero` (one value), `contiguous`, `periodic`
    (the same short pattern in every row: a bias of the last axis broadcast over rows longer
    than it, which the CPU kernel repeats once into a row-long buffer), or `general`."""
    inner = [a for a in range(split, len(domain)) if domain[a] != 1]
    bcast = p.broadcast_axes(domain)
    if all(a in bcast for a in inner):
        return "zero"
    if all(a not in bcast for a in inner) and not cut & set(inner[1:]):
        return "contiguous"
    outer = [a for a in range(split) if domain[a] != 1]
    row = [d for d in (domain[a] for a in inner) if d is not None]
    if all(a in bcast for a in outer) and not cut and len(row) == len(inner):
        return "periodic" if math.prod(row) <= PERIODIC_ROW_ELEMENTS else "general"
    return "general"


def _nontrivial(p: Placement) -> list[tuple[int, int | None]]:
    return [(a, d) for a, d in zip(p.axes, p.dims, strict=True) if d != 1]


def _same_dims(a: Dims, b: Dims) -> bool:
    return len(a) == len(b) and all(x == y for x, y in zip(a, b, strict=True))


def _d(d: int | None) -> str:
    return "?" if d is None else str(d)


def fmt(dims: Dims) -> str:
    return "[" + ",".join(_d(d) for d in dims) + "]"


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
