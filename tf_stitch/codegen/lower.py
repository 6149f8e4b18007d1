"""Lowers one planned group to the kernel IR.

Reductions are placed first (each accumulates in the loop of its input's level and is finalized
before the next loop), then every output is stored where its value is ready. Values are built on
demand: a per-element value needed in a later loop is loaded from its row buffer if the memory
plan buffered it, else recomputed there; per-row values are computed once per row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from tf_stitch.codegen.buffer_reuse import reuse_buffers
from tf_stitch.codegen.kernel_ir import (
    Access,
    Accumulate,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Expr,
    Kernel,
    Let,
    Lit,
    Load,
    Param,
    Pattern,
    ReduceKind,
    ReduceResult,
    Reduction,
    Store,
    Tile,
    TileSegment,
    Var,
    accumulator_dtype,
    compute_dtype,
)
from tf_stitch.codegen.lower_attention import lower_attention
from tf_stitch.codegen.lower_parts import (
    LoweringError,
    access_of,
    call_attrs,
    domain_sizes,
    slice_access,
    symbol_binder,
    tensor_strides,
)
from tf_stitch.codegen.sizes import Size, Sym, add, multiply
from tf_stitch.fusion.cost_model import COLUMN_LANES, ROW_GUESS, unit_cycles
from tf_stitch.fusion.layout_types import (
    GatherSource,
    LayoutKind,
    MatMulTile,
    Placement,
    SliceSource,
    data_inputs,
)
from tf_stitch.fusion.op_kinds import OpKind, buffer_itemsize, op_spec
from tf_stitch.fusion.planner import Group
from tf_stitch.graph.ir import INT_DTYPES, Graph, Node, TensorRef
from tf_stitch.graph.values import scalar_constant

_LITERAL_DTYPES = frozenset({"float32", "bool", "float16", "bfloat16"}) | INT_DTYPES


def lower(graph: Graph, group: Group, name: str) -> Kernel:
    if group.attention is not None:
        return lower_attention(graph, group, name)
    return _Lowerer(graph, group, name).run()


class _Lowerer:
    def __init__(self, graph: Graph, group: Group, name: str) -> None:
        self.graph = graph
        self.group = group
        self.layout = group.layout
        self.members = {n.name: n for n in group.nodes}
        self.domain = domain_sizes(group)
        top = max(group.level.values(), default=0)
        self.loops: list[list] = [[] for _ in range(top + 1)]
        self.row_stmts: list[list] = [[] for _ in range(top + 2)]
        self.row_env: dict[TensorRef, Expr] = {}
        self.loop_env: list[dict[TensorRef, Expr]] = [{} for _ in range(top + 1)]
        self.reductions: list[Reduction] = []
        self.buffers: dict[TensorRef, Buffer] = {}
        self.counter = 0
        self.kernel = Kernel(name, self.domain, self.layout.split, [], [])
        self.params: dict[TensorRef, Param] = {}
        self.literals: dict[TensorRef, Lit] = {}
        self.slice_params: dict[tuple[TensorRef, tuple[int | None, ...], tuple[int, ...]], Param]
        self.slice_params = {}
        self.slice_loads: dict[TensorRef, tuple[Param, Size]] = {}
        self.raw_params: dict[TensorRef, Param] = {}  # matmul operands, read whole
        self.tile_names: dict[TensorRef, Tile] = {}

    def run(self) -> Kernel:
        self._bind_inputs()
        self._bind_outputs()
        for node in self.group.nodes:
            if op_spec(node.op).kind is OpKind.REDUCE:
                self._reduce(node)
        for ref, param in zip(self.group.outputs, self.kernel.outputs, strict=True):
            concat = self.layout.concats.get(ref)
            if concat is not None:
                for n, part in enumerate(concat.parts):
                    self._store(part, param, n * concat.width)
            elif ref not in self.layout.tiles:  # tiles are written whole, per block
                self._store(ref, param)
        k = self.kernel
        while self.loops and not self.loops[-1]:
            self.loops.pop()
        k.loops = self.loops
        k.row_stmts = self.row_stmts[: len(self.loops) + 1]
        leftover = [s for stmts in self.row_stmts[len(self.loops) + 1 :] for s in stmts]
        k.row_stmts[-1].extend(leftover)
        k.reductions = self.reductions
        k.buffers = list(self.buffers.values())
        k.schedule = str(self.group.schedule)
        k.members = [f"{n.name} ({n.op})" for n in self.group.nodes]
        k.unit_cost = self._unit_cost()
        k.buffer_reuse = reuse_buffers(k)
        k.tiles = list(self.tile_names.values())
        k.block_rows = self.group.memory.block_rows if k.tiles else 1
        if self.layout.kind is LayoutKind.COLUMN:  # a unit of work is one chunk of lanes
            k.lanes = k.block_rows = COLUMN_LANES
        return k

    # -- parameters -------------------------------------------------------------------------
    def _bind_inputs(self) -> None:
        for ref in self.group.inputs:
            if ref not in self.layout.placements:
                continue  # read only through slices or by matmuls (below)
            info = self.graph.info(ref)
            value = scalar_constant(self.graph, ref)
            # (a constant with control inputs stays an input: in a branch or a loop frame,
            # that edge is what keeps the kernel from running where the branch is dead)
            ordered = bool(self.graph.node(ref.node).control_inputs)
            if value is not None and info.dtype in _LITERAL_DTYPES and not ordered:
                self.literals[ref] = Lit(value, info.dtype)
                continue
            param = self._param(ref, f"in{len(self.kernel.inputs)}", len(self.kernel.inputs))
            self.kernel.inputs.append(param)
            self.params[ref] = param
        for ref, gather in self.layout.gathers.items():
            self._bind_gather(ref, gather)
        for ref, tile in self.layout.tiles.items():
            self._bind_tile(ref, tile)
        for out, source in self.layout.slices.items():
            self._slice_param(out, source)
        for axis, size in enumerate(self.domain):
            if isinstance(size, Sym):
                self.kernel.symbols.append((str(size), *symbol_binder(self.kernel, axis)))

    def _bind_gather(self, ref: TensorRef, gather: GatherSource) -> None:
        """The table as an input whose row offset is its index times the row length."""
        index = self.params[gather.indices]
        placement = self.layout.placements[ref]
        table = tuple(self.graph.info(gather.table).shape or ())
        value_axes = placement.axes[len(placement.axes) - (len(table) - 1) :]
        row = Placement(placement.frame, table[1:], value_axes)
        access = access_of(row, self.domain, self.layout.split)
        n = len(self.kernel.inputs)
        param = Param(
            n,
            f"in{n}",
            gather.table,
            self.graph.info(gather.table).dtype,
            table,
            (-1, *value_axes),
            replace(access, outer=Pattern.GATHER, row_stride=gather.row_elements),
            False,
            gather=index.name,
            gather_rows=gather.rows,
            gather_wrap=gather.wrap,
        )
        self.kernel.inputs.append(param)
        self.params[ref] = param

    def _bind_tile(self, ref: TensorRef, tile: MatMulTile) -> None:
        """The operands of a matmul as whole-tensor inputs; a direct read of its result."""
        rows = self._tile_row_axes(tile)
        segments = []
        for seg in tile.segments:
            rank = len(self.graph.info(seg.tensor).shape or ())
            param = self._raw_param(seg.tensor, rows + (-1,) * (rank - len(rows)))
            segments.append(TileSegment(param.name, seg.offset, seg.row_stride, seg.width))
        b = self._raw_param(tile.b, (-1, -1))
        name = f"t{len(self.tile_names)}"
        self.tile_names[ref] = Tile(name, tuple(segments), b.name, tile.k, tile.n)
        if ref in self.layout.placements:
            param = replace(self._param(ref, f"{name}r", -1), tile=name)
            self.kernel.tile_params.append(param)
            self.params[ref] = param

    def _tile_row_axes(self, tile: MatMulTile) -> tuple[int, ...]:
        """The domain axes of a tile's row dims: the last outer axes."""
        split = self.layout.split
        return tuple(range(split - tile.row_dims, split))

    def _raw_param(self, ref: TensorRef, axes: tuple[int, ...]) -> Param:
        if ref not in self.raw_params:
            index = len(self.kernel.inputs)
            param = self._whole_tensor(ref, f"in{index}", index, axes)
            self.kernel.inputs.append(param)
            self.raw_params[ref] = param
        return self.raw_params[ref]

    def _slice_param(self, out: TensorRef, source: SliceSource) -> None:
        """One kernel input per (source tensor, window shape); each slice loads at an offset.
        A window of a matmul tile reads the tile instead."""
        key = (source.tensor, source.window, source.axes)
        param = self.slice_params.get(key)
        if param is None:
            tile = self.tile_names.get(source.tensor)
            index = -1 if tile else len(self.kernel.inputs)
            name = f"{tile.name}w{len(self.kernel.tile_params)}" if tile else f"in{index}"
            param = Param(
                index,
                name,
                source.tensor,
                self.graph.info(source.tensor).dtype,
                tuple(source.dims),
                tuple(source.axes),
                slice_access(source, self.domain, self.layout.split),
                self.layout.is_row_level(out),
                tile.name if tile else "",
            )
            (self.kernel.tile_params if tile else self.kernel.inputs).append(param)
            self.slice_params[key] = param
        sizes = tuple(self.domain[a] if a >= 0 else 1 for a in source.axes)
        offset: Size = 0
        for begin, stride in zip(source.begin, tensor_strides(source.dims, sizes), strict=True):
            if begin:
                offset = add(offset, multiply(begin, stride))
        self.slice_loads[out] = (param, offset)

    def _bind_outputs(self) -> None:
        for i, ref in enumerate(self.group.outputs):
            tile = self.tile_names.get(ref)
            if ref in self.layout.concats:
                self.kernel.outputs.append(self._concat_param(ref, f"out{i}", i))
                continue
            if tile is None:
                self.kernel.outputs.append(self._param(ref, f"out{i}", i))
                continue
            rows = self._tile_row_axes(self.layout.tiles[ref])
            param = self._whole_tensor(ref, f"out{i}", i, (*rows, -1))
            self.kernel.outputs.append(param)
            self.tile_names[ref] = replace(tile, out=param.name)

    def _concat_param(self, ref: TensorRef, name: str, index: int) -> Param:
        """The concatenation, on the axes of its parts (its last dim is n parts wide)."""
        part = self.layout.placements[self.layout.concats[ref].parts[0]]
        dims = tuple(self.graph.info(ref).shape or ())
        access = access_of(Placement(part.frame, dims, part.axes), self.domain, self.layout.split)
        inner = [a for a in range(self.layout.split, len(self.domain)) if self.domain[a] != 1]
        if len(inner) > 1:  # rows of the parts are not contiguous in the concatenation
            access = replace(access, inner=Pattern.GENERAL)
        info = self.graph.info(ref)
        per_row = self.layout.is_row_level(self.layout.concats[ref].parts[0])
        return Param(index, name, ref, info.dtype, dims, part.axes, access, per_row)

    def _whole_tensor(self, ref: TensorRef, name: str, index: int, axes: tuple[int, ...]) -> Param:
        """A tensor the kernel addresses itself (a matmul operand or result), not per element."""
        info = self.graph.info(ref)
        access = Access((0,) * len(self.domain), Pattern.ZERO, Pattern.ZERO, 0)
        return Param(index, name, ref, info.dtype, tuple(info.shape or ()), axes, access, False)

    def _param(self, ref: TensorRef, name: str, index: int) -> Param:
        placement = self.layout.placements[ref]
        info = self.graph.info(ref)
        return Param(
            index,
            name,
            ref,
            info.dtype,
            tuple(placement.dims),
            tuple(placement.axes),
            access_of(placement, self.domain, self.layout.split),
            self.layout.is_row_level(ref),
        )

    def _level(self, ref: TensorRef) -> int:
        return self.group.level.get(ref, 0)

    # -- values -----------------------------------------------------------------------------
    def _var(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def _let(self, stmts: list, dtype: str, expr: Expr) -> Expr:
        if isinstance(expr, Var | Lit):
            return expr
        name = self._var()
        stmts.append(Let(name, dtype, expr))
        return Var(name)

    def value(self, ref: TensorRef, loop: int | None) -> Expr:
        """The expression of `ref` in loop `loop` (None: in per-row code)."""
        if ref in self.literals:
            return self.literals[ref]
        if ref in self.params or ref in self.slice_loads:
            param, offset = self.slice_loads.get(ref) or (self.params[ref], 0)
            load = Load(param.name, offset)
            if param.per_row:
                if ref not in self.row_env:
                    self.row_env[ref] = self._let(self.row_stmts[0], param.dtype, load)
                return self.row_env[ref]
            if loop is None:
                raise LoweringError(f"{ref} varies along the row but is used per row")
            return self._cached(loop, ref, lambda: load)
        if self.layout.is_row_level(ref):
            return self._row_value(ref)
        if loop is None:
            raise LoweringError(f"{ref} varies along the row but is used per row")
        level = self._level(ref)
        if level < loop and ref in self.group.memory.buffered:
            buf = self._buffer(ref)
            return self._cached(loop, ref, lambda: BufferLoad(buf.name))
        return self._cached(loop, ref, lambda: self._compute(ref, loop))

    def _cached(self, loop: int, ref: TensorRef, make: Callable[[], Expr]) -> Expr:
        env = self.loop_env[loop]
        if ref not in env:
            env[ref] = self._let(self.loops[loop], self.graph.info(ref).dtype, make())
        return env[ref]

    def _row_value(self, ref: TensorRef) -> Expr:
        if ref not in self.row_env:
            node = self.members[ref.node]
            if op_spec(node.op).kind is OpKind.REDUCE:
                raise LoweringError(f"reduction {node.name} read before it is placed")
            expr = self._op_expr(node, None)
            stmts = self.row_stmts[self._level(ref)]
            self.row_env[ref] = self._let(stmts, self.graph.info(ref).dtype, expr)
        return self.row_env[ref]

    def _compute(self, ref: TensorRef, loop: int) -> Expr:
        return self._op_expr(self.members[ref.node], loop)

    def _op_expr(self, node: Node, loop: int | None) -> Expr:
        kind = op_spec(node.op).kind
        if kind in (OpKind.RESHAPE, OpKind.BROADCAST, OpKind.TRANSPOSE):
            return self.value(node.inputs[0], loop)
        args = tuple(self.value(r, loop) for r in data_inputs(node))
        return Call(node.op, args, call_attrs(node))

    def _buffer(self, ref: TensorRef) -> Buffer:
        if ref not in self.buffers:
            level = self._level(ref)
            value = self.value(ref, level)
            assert isinstance(value, Var)
            dtype = self.graph.info(ref).dtype
            elements = self.group.memory.buffered[ref] // buffer_itemsize(dtype)
            buf = Buffer(f"buf{len(self.buffers)}", compute_dtype(dtype), elements)
            self.buffers[ref] = buf
            self.loops[level].append(BufferStore(buf.name, value.name))
        return self.buffers[ref]

    # -- reductions and outputs ---------------------------------------------------------------
    def _reduce(self, node: Node) -> None:
        src = node.inputs[0]
        loop = self._level(src)
        values = node.outputs[0].dtype
        dtype = compute_dtype(values)
        kind = ReduceKind(node.op)
        accumulator = accumulator_dtype(kind, values)
        integers = values if values in INT_DTYPES else ""
        red = Reduction(f"r{len(self.reductions)}", kind, loop, accumulator, integers)
        self.reductions.append(red)
        value = self.value(src, loop)
        var = value.name if isinstance(value, Var) else self._force_var(loop, src, value)
        self.loops[loop].append(Accumulate(red.name, var))
        out = node.output(0)
        self.row_env[out] = self._let(self.row_stmts[loop + 1], dtype, ReduceResult(red.name))

    def _force_var(self, loop: int, ref: TensorRef, expr: Expr) -> str:
        name = self._var()
        self.loops[loop].append(Let(name, self.graph.info(ref).dtype, expr))
        return name

    def _store(self, ref: TensorRef, param: Param, offset: Size = 0) -> None:
        if param.per_row:
            value = self.value(ref, None)
            stmts = self.row_stmts[self._level(ref)]
            var = value.name if isinstance(value, Var) else self._row_force(stmts, param, value)
            stmts.append(Store(param.name, var, offset))
            return
        loop = self._level(ref)
        value = self.value(ref, loop)
        var = value.name if isinstance(value, Var) else self._force_var(loop, ref, value)
        self.loops[loop].append(Store(param.name, var, offset))

    def _row_force(self, stmts: list, param: Param, expr: Expr) -> str:
        name = self._var()
        stmts.append(Let(name, param.dtype, expr))
        return name

    def _unit_cost(self) -> int:
        """Estimated CPU cycles of one unit of work (a row, or a block of rows)."""
        row = 1
        for d in self.layout.inner:
            row *= d if d is not None else ROW_GUESS
        ops = sum(op_spec(n.op).cost for n in self.group.nodes)
        macs = sum(t.k * t.n for t in self.layout.tiles.values())
        rows = self.group.memory.block_rows if self.layout.tiles else 1
        if self.layout.kind is LayoutKind.COLUMN:
            rows = COLUMN_LANES
        return unit_cycles(row, ops, macs, rows)
