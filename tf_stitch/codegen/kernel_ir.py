"""The kernel IR: one stitched kernel as blocks of rows, stages, and scalar statements.

A kernel runs one *unit* per point of the outer axes (a row; a column's point for a reduction
over outer axes, whose loops stride through memory). For each row it runs
`row_stmts[0]`, then loop 0 over the row's inner elements, then `row_stmts[1]` (reduction results
and per-row values that need them), loop 1, ... Rows run in blocks of `block_rows`: before a
block's rows, each matmul tile of the kernel is computed for the block's rows. Statements are
in SSA form over named scalars.
Both emitters (C++ for CPU, CUDA for GPU) print this IR; neither sees the TensorFlow graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from tf_stitch.codegen.sizes import Size
from tf_stitch.graph.ir import INT_DTYPES, TensorRef


class Pattern(StrEnum):
    """How an offset is computed along the rows (`Access.outer`) or within one (`.inner`)."""

    ZERO = "zero"  # broadcast: no axis varies
    CONTIGUOUS = "contiguous"  # row * row_stride, or the element index itself
    STRIDED = "strided"  # inner only: the element index times inner_stride
    GENERAL = "general"  # decomposed into coordinates with the strides
    GATHER = "gather"  # outer only: a row read from a gather's indices


@dataclass(frozen=True)
class Access:
    """How a tensor is indexed from (row, element-in-row) coordinates.

    `strides` has the tensor's stride along every domain axis (0 where it broadcasts).
    `outer`/`inner` say how the row offset and the in-row offset are computed: `contiguous`
    (row * row_stride, or the element index itself), `strided` (inner only: the element index
    times `inner_stride`, as a column reduction walks its rows), `zero` (broadcast), or
    `general` (decomposed into coordinates with the strides).
    """

    strides: tuple[Size, ...]
    outer: Pattern
    inner: Pattern
    row_stride: Size  # the offset between consecutive rows when `outer` is contiguous
    inner_stride: Size = 1  # the offset between consecutive elements when `inner` is strided


@dataclass(frozen=True)
class Param:
    """A kernel input or output tensor."""

    index: int
    name: str  # "in0", "out1"
    tensor: TensorRef  # the graph tensor it carries
    dtype: str
    dims: tuple[int | None, ...]  # the tensor's shape (None = bound at run time)
    axes: tuple[int, ...]  # the domain axis of each dim
    access: Access
    per_row: bool  # one value per row (loaded or stored once per row)
    tile: str = ""  # a read of a matmul tile (not a kernel input): the tile's name
    gather: str = ""  # rows of this table picked by the (per-row) index param named here
    gather_rows: int = 0  # the table's rows: an index outside [0, gather_rows) is an error
    gather_wrap: bool = False  # an index in [-gather_rows, 0) counts from the table's end


@dataclass(frozen=True)
class TileSegment:
    """`width` columns of a matmul's left operand: input param `param` from element `offset`
    of row 0, `row_stride` elements between rows."""

    param: str
    offset: int
    row_stride: int
    width: int


@dataclass(frozen=True)
class Tile:
    """left @ `b` for the rows of each block: the left operand's columns are `segments` (in
    order; widths sum to k), `b` is an input param [k, n]; into the tile `name`
    ([block_rows, n]), or into output param `out`."""

    name: str
    segments: tuple[TileSegment, ...]
    b: str
    k: int
    n: int
    out: str = ""


# -- expressions --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Load:
    param: str
    offset: Size = 0  # elements from the tensor's start (a slice's window)


@dataclass(frozen=True)
class Lit:
    value: float | int | bool
    dtype: str


@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class Call:
    op: str  # a TensorFlow op name, lowered to a scalar expression by each emitter
    args: tuple[Expr, ...]
    attrs: tuple[tuple[str, float | str | bool], ...] = ()

    def attr(self, key: str) -> float | str | bool:
        return dict(self.attrs)[key]


@dataclass(frozen=True)
class ReduceResult:
    reduction: str


@dataclass(frozen=True)
class BufferLoad:
    buffer: str


Expr = Load | Lit | Var | Call | ReduceResult | BufferLoad


# -- statements ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Let:
    var: str
    dtype: str
    expr: Expr


@dataclass(frozen=True)
class Store:
    param: str
    var: str
    offset: Size = 0  # elements past the param's position (a part of a concatenation)


@dataclass(frozen=True)
class Accumulate:
    reduction: str
    var: str


@dataclass(frozen=True)
class BufferStore:
    buffer: str
    var: str


Stmt = Let | Store | Accumulate | BufferStore


class ReduceKind(StrEnum):
    """What a reduction computes (the TensorFlow op it lowers)."""

    SUM = "Sum"
    MEAN = "Mean"  # a Sum divided by the count when it is read
    MAX = "Max"
    MIN = "Min"
    PROD = "Prod"


@dataclass(frozen=True)
class Reduction:
    name: str
    kind: ReduceKind
    loop: int  # the loop that accumulates it
    dtype: str = "float32"  # what it accumulates in: float64's own, float32 for the others
    values: str = ""  # the integer dtype of the values reduced (their extremes start Max, Min)


def accumulator_dtype(kind: ReduceKind, dtype: str) -> str:
    """What a reduction of `kind` over values of `dtype` accumulates in: float32 for the 16-bit
    floats (as TensorFlow's do); an integer Mean in int64 or uint64 (as TensorFlow's: its sum
    does not wrap at the values' width), 8- and 16-bit integers in 32 bits (their sums and
    products wrapped at 32 bits and truncated are those wrapped at their own width), else the
    values' own."""
    if dtype in INT_DTYPES:
        unsigned = dtype.startswith("u")
        if kind is ReduceKind.MEAN:
            return "uint64" if unsigned else "int64"
        if dtype in ("int8", "int16", "uint8", "uint16"):
            return "uint32" if unsigned else "int32"
        return dtype
    return compute_dtype(dtype)


def compute_dtype(dtype: str) -> str:
    """The dtype a kernel computes a value of `dtype` in: float32 for the 16-bit floats (stored
    in their format, see cpu_half.h), else the value's own."""
    return "float32" if dtype in ("float16", "bfloat16") else dtype


@dataclass(frozen=True)
class Buffer:
    name: str
    dtype: str
    elements: int  # per row (static: the memory plan only buffers static rows)


@dataclass(frozen=True)
class Attention:
    """An attention kernel (fusion/attention.py): the domain is (batch axes..., queries, keys,
    head dim, value dim) and a unit of work is one query row (a block of `block_rows` rows on
    the CPU). Q, K and V are scalar expressions of `Load`s (each param's `access.strides` give
    its offset at a point of the domain); `score` turns the raw score, `Var(SCORE)`, into the
    softmax's input; `post` (if any) turns a probability, `Var(PROB)`, into what weights a row
    of V: a product with factors or a selection of it or 0, so that it may be applied to the
    softmax's exponentials before their sum divides them. The context row is written to
    output `out`."""

    batch: int
    q: Expr
    k: Expr
    v: Expr
    score: Expr
    out: str
    post: Expr | None = None


SCORE = "ts_s"  # the raw score q . k in an attention's `score` expression
PROB = "ts_p"  # a probability (or an exponential not yet divided) in its `post` expression


@dataclass
class Kernel:
    name: str
    domain: tuple[Size, ...]
    split: int
    inputs: list[Param]
    outputs: list[Param]
    # symbol s (a dynamic domain axis) is bound from dim `dim` of input `input`
    symbols: list[tuple[str, int, int]] = field(default_factory=list)  # (axis name, input, dim)
    row_stmts: list[list[Stmt]] = field(default_factory=list)
    loops: list[list[Stmt]] = field(default_factory=list)
    reductions: list[Reduction] = field(default_factory=list)
    buffers: list[Buffer] = field(default_factory=list)
    schedule: str = ""
    members: list[str] = field(default_factory=list)
    unit_cost: int = 1
    tiles: list[Tile] = field(default_factory=list)
    tile_params: list[Param] = field(default_factory=list)  # reads of tiles
    block_rows: int = 1
    buffer_reuse: str = ""  # what sharing buffers saved (buffer_reuse.py), if anything
    # A column kernel (0: a row kernel) runs up to `lanes` consecutive units together, one
    # lane each, so that its loads along the units' axis are contiguous; its row buffers hold
    # `lanes` rows.
    lanes: int = 0
    attention: Attention | None = None

    @property
    def lane_axis(self) -> int | None:
        """The outer axis consecutive units step along (the last one longer than 1)."""
        longer = [a for a in range(self.split) if self.domain[a] != 1]
        return longer[-1] if longer else None

    @property
    def outer(self) -> tuple[Size, ...]:
        return self.domain[: self.split]

    @property
    def inner(self) -> tuple[Size, ...]:
        return self.domain[self.split :]
