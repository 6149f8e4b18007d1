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

The layout's types are in layout_types.py; the placing of each node's tensors, in
layout_placer.py; the splits an elementwise group may take, in loop_splits.py.
"""

from __future__ import annotations

from collections.abc import Iterable

from tf_stitch.fusion.cost_model import choose_loop_split
from tf_stitch.fusion.decision import Decision, forbid
from tf_stitch.fusion.layout_placer import Placer
from tf_stitch.fusion.layout_types import (
    Dims,
    Layout,
    LayoutError,
    LayoutKind,
    Placement,
    SliceSource,
    Symbols,
    broadcast_all,
    data_inputs,
    fmt,
    same_dims,
)
from tf_stitch.fusion.loop_splits import valid_loop_splits
from tf_stitch.fusion.op_kinds import OpKind, op_spec
from tf_stitch.fusion.static_args import reduction_axes
from tf_stitch.fusion.symbolic_dims import SymbolicDims
from tf_stitch.graph.ir import Graph, Node, TensorRef


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


class _Analysis(Placer):
    """Chooses the domain, places each node's tensors on it (`Placer`), then the units of work."""

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
        kind, split = (
            (LayoutKind.ROW, self.split) if reductions else (LayoutKind.LOOP, len(self.domain))
        )
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
        layout = Layout(domain, self.split, LayoutKind.COLUMN)
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
            if r_axes != axes or not same_dims(shape, domain):
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

    def _shaping_outputs(self, node: Node) -> list[TensorRef]:
        """The outputs whose shapes take part in the domain: not a concatenation (its parts
        do), nor the transpose of a computed value (its input does)."""
        kind = op_spec(node.op).kind
        if kind is OpKind.CONCAT:
            return []
        if kind is OpKind.TRANSPOSE and node.inputs[0].node in self.names:
            return []
        return [node.output(0)]

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


def _read_inputs(node: Node) -> list[TensorRef]:
    """The inputs whose shapes take part in the domain (a slice's or a transpose's source, a
    gather's table and indices do not)."""
    kinds = (OpKind.SLICE, OpKind.GATHER, OpKind.TRANSPOSE)
    return [] if op_spec(node.op).kind in kinds else data_inputs(node)
