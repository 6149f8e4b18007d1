"""Every rule about what may be stitched, in one place.

Node rules: known op kind, dtypes, stateful ops, control edges, fed tensors, constant
attribute inputs. Group rules: one device, no cycle through outside nodes, a layout, and outputs
that a kernel can write once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from tensorflow.python.framework import op_def_registry

from tf_stitch.fusion.decision import Decision, allow, forbid
from tf_stitch.fusion.integers import integer_legality
from tf_stitch.fusion.layout_types import OUTER, Layout, LayoutKind, fmt
from tf_stitch.fusion.op_kinds import (
    FLOAT_DTYPES,
    FUSIBLE_DTYPES,
    HALF_DTYPES,
    OpKind,
    op_spec,
)
from tf_stitch.fusion.static_args import reduction_axes, slice_window, transpose_perm
from tf_stitch.fusion.symbolic_dims import SymbolicDims
from tf_stitch.graph.ir import INT_DTYPES, Graph, Node, TensorRef
from tf_stitch.graph.liveness import Liveness, liveness
from tf_stitch.graph.values import constant_value


@dataclass
class Context:
    """What the legality checks need to know about the whole graph, computed once."""

    graph: Graph
    tile_budget: int | None = None  # the bytes of a kernel's tiles' right operands together
    gpu: bool = False  # planned for a GPU: TensorFlow's GPU library calls fuse fewer activations
    fed: set[TensorRef] = field(init=False)
    fetched: set[TensorRef] = field(init=False)

    def __post_init__(self) -> None:
        self.fed = self.graph.fed()
        self.fetched = self.graph.fetched()

    @cached_property
    def consumers(self) -> dict[TensorRef, list[str]]:
        return self.graph.consumers()

    @cached_property
    def control_consumers(self) -> dict[str, list[str]]:
        return self.graph.control_consumers()

    @cached_property
    def successors(self) -> dict[str, list[str]]:
        """Data and control successors of every node."""
        succ: dict[str, list[str]] = {}
        for ref, users in self.consumers.items():
            succ.setdefault(ref.node, []).extend(users)
        for src, users in self.control_consumers.items():
            succ.setdefault(src, []).extend(users)
        return succ

    @cached_property
    def order(self) -> dict[str, int]:
        return {n.name: i for i, n in enumerate(self.graph.topological_order())}

    @cached_property
    def late_order(self) -> dict[str, int]:
        """Positions in a topological order that puts each node as late as it can go: right
        before the first of its consumers placed. The cycle check walks windows of an order
        (`merge.creates_cycle`); in `order`, a node that reads only weights (a layer norm's
        `Neg` of its scale) sits at the start of the graph, so its layer's group spans the
        graph and every window that reaches it does too."""
        preds = {n: self.graph.predecessors(node) for n, node in self.graph.nodes.items()}
        waiting = dict.fromkeys(preds, 0)  # consumers not placed yet
        for ps in preds.values():
            for p in ps:
                waiting[p] += 1
        ready = [n for n in reversed(self.graph.nodes) if waiting[n] == 0]
        placed: list[str] = []
        while ready:  # from the last node back; a node goes as soon as its consumers have
            name = ready.pop()
            placed.append(name)
            # the earliest producer goes on the stack last: it is placed next, so a node
            # that reads only weights goes right before its consumer
            for p in sorted(preds[name], key=self.order.__getitem__, reverse=True):
                waiting[p] -= 1
                if waiting[p] == 0:
                    ready.append(p)
        if len(placed) != len(preds):
            raise ValueError("the graph has a cycle")  # `order` raised already, naming it
        return {name: i for i, name in enumerate(reversed(placed))}

    @cached_property
    def dims(self) -> SymbolicDims:
        """Which unknown sizes the graph proves equal."""
        return SymbolicDims(self.graph)

    @cached_property
    def liveness(self) -> dict[str, Liveness]:
        """Each node's loop frame and the Switch branches it is alive under."""
        return liveness(self.graph)


def is_stateful(op: str) -> bool:
    op_def = op_def_registry.get(op)
    return op_def is None or bool(op_def.is_stateful)


def node_legality(ctx: Context, node: Node) -> Decision:
    """May `node` be part of a stitched group at all?"""
    spec = op_spec(node.op)
    if spec.kind is OpKind.OPAQUE:
        return forbid(f"{node.op} is opaque to the fuser")
    if spec.kind is OpKind.BATCH_MATMUL:
        return forbid(f"{node.op} ({spec.kind.value}) is not stitched yet")
    if is_stateful(node.op):
        return forbid(f"{node.op} is stateful")
    if node.device and "CPU" not in node.device.upper():
        return forbid(f"placed on {node.device}; stitched kernels run on the CPU only so far")
    if node.control_inputs:
        return forbid("has control inputs (a control edge would cross the kernel)")
    if node.name in ctx.control_consumers:
        return forbid("is the source of a control edge")
    for i, info in enumerate(node.outputs):
        if node.output(i) in ctx.fed:
            return forbid(f"output {i} is fed, so its producer must stay")
        if info.dtype not in FUSIBLE_DTYPES:
            return forbid(f"output dtype {info.dtype} is not fused yet")
        if info.shape is None:
            return forbid("output rank is unknown")
    data = node.inputs if spec.kind is OpKind.ELEMENTWISE else node.inputs[: spec.data_inputs]
    if spec.kind is OpKind.CONCAT:
        data = node.inputs[:-1]
    if spec.kind is OpKind.GATHER:
        data = data[:1]  # the indices are integers (gather_legality checks them)
    for ref in data:
        info = ctx.graph.info(ref)
        if info.dtype not in FUSIBLE_DTYPES:
            return forbid(f"input {ref} has dtype {info.dtype}, not fused yet")
        if info.shape is None:
            return forbid(f"input {ref} has an unknown rank")
    integers = integer_legality(ctx.graph, node, ctx.consumers)
    if not integers.ok:
        return integers
    return _op_specific(ctx.graph, node)


def _op_specific(graph: Graph, node: Node) -> Decision:
    kind = op_spec(node.op).kind
    if kind is OpKind.REDUCE:
        if reduction_axes(graph, node) is None:
            return forbid("reduction axes are not a constant")
        if node.outputs[0].dtype not in FLOAT_DTYPES and node.outputs[0].dtype not in INT_DTYPES:
            return forbid(f"{node.outputs[0].dtype} reductions are not fused")
    targets = node.op in ("Reshape", "ExpandDims", "BroadcastTo")
    if targets and constant_value(graph, node.inputs[1]) is None:
        return forbid(f"{node.op} target is not a constant")
    if node.op == "Tile" and not _tile_is_broadcast(graph, node):
        return forbid("Tile repeats an axis longer than 1 (not a broadcast)")
    if kind is OpKind.TRANSPOSE and transpose_perm(graph, node) is None:
        return forbid("Transpose permutation is not a constant")
    if kind is OpKind.SLICE and slice_window(graph, node) is None:
        return forbid("Slice bounds are not constant, or cut an axis of unknown size")
    if node.op == "Select":
        cond, x = graph.info(node.inputs[0]), graph.info(node.inputs[1])
        if cond.shape != x.shape:
            return forbid("Select with a lower-rank condition selects whole rows")
    if node.op in ("Equal", "NotEqual") and not node.attrs.get("incompatible_shape_error", True):
        return forbid(f"{node.op} with incompatible_shape_error=False")
    if kind is OpKind.MATMUL:
        return matmul_legality(graph, node)
    if kind is OpKind.GATHER:
        return gather_legality(graph, node)
    if kind is OpKind.CONCAT:
        return concat_legality(graph, node)
    return allow()


def concat_legality(graph: Graph, node: Node) -> Decision:
    """May this ConcatV2 be written by a kernel? Its parts must have one shape, of known size
    from the concatenation's axis on: part k of a unit's row then lies k part-rows further in
    the concatenation's (along the last axis, or an inner one: Keras' `Concatenate(axis=1)`
    of [batch, 1, d] embeddings)."""
    parts = node.inputs[:-1]
    shapes = {graph.info(r).shape for r in parts}
    axis = constant_value(graph, node.inputs[-1])
    if len(parts) < 2 or len(shapes) != 1:
        return forbid("ConcatV2 of parts of different shapes")
    (shape,) = shapes
    if axis is None or not shape:
        return forbid("ConcatV2 along an axis that is not a constant")
    if any(d is None for d in shape[int(axis) % len(shape) :]):
        return forbid("ConcatV2 of parts of unknown size from its axis on")
    return allow()


def gather_legality(graph: Graph, node: Node) -> Decision:
    """May this GatherV2 read its table's rows inside a kernel?"""
    params, indices, axis_ref = node.inputs[:3]
    axis = constant_value(graph, axis_ref)
    if axis is None or int(axis) != 0 or int(node.attrs.get("batch_dims", 0)) != 0:
        return forbid("GatherV2 not of whole rows (axis 0, no batch dims)")
    if graph.info(indices).dtype not in ("int32", "int64"):
        return forbid(f"GatherV2 indices of dtype {graph.info(indices).dtype}")
    table = graph.info(params).shape
    if not table or any(d is None for d in table):
        return forbid("GatherV2 from a table of unknown size")
    if graph.info(indices).shape is None:
        return forbid("GatherV2 indices of unknown rank")
    return allow()


# A matmul is *small* when its right operand (read whole by every block of rows) fits this: on
# a CPU core it stays in L2 while the blocks stream the left operand; on a GPU a block tiles it
# through shared memory along K. Larger ones are faster as library calls.
SMALL_MATMUL_BYTES = 1 << 20


def matmul_legality(graph: Graph, node: Node) -> Decision:
    """May this MatMul be computed inside a kernel (as a tile of its group's rows)?"""
    for flag in ("transpose_a", "transpose_b", "adj_x", "adj_y"):
        if node.attrs.get(flag, False):
            return forbid(f"{node.op} with {flag}: only row-major operands are tiled so far")
    a, b = (graph.info(r).shape for r in node.inputs[:2])
    if node.op == "BatchMatMulV2" and a is not None and b is not None and len(b) > 2:
        return forbid("BatchMatMulV2 of batched right operands: not tiled yet")
    if a is None or b is None or len(b) != 2 or len(a) < 2 or (len(a) > 2 and node.op == "MatMul"):
        return forbid(f"{node.op} operands are not matrices of known rank")
    k, n = b
    if k is None or n is None or a[-1] != k:
        return forbid("MatMul's right operand has an unknown size")
    if node.outputs[0].dtype not in {"float32"} | HALF_DTYPES:
        return forbid(f"{node.outputs[0].dtype} matmuls are not tiled")
    size = k * n * 4  # a 16-bit right operand is widened to float32 once per call
    if size > SMALL_MATMUL_BYTES:
        return forbid(
            f"large {node.op} ({k}x{n} right operand, {size} B > {SMALL_MATMUL_BYTES} B): "
            "stays a library call"
        )
    return allow()


def _tile_is_broadcast(graph: Graph, node: Node) -> bool:
    """Tile with constant multiples that only repeat axes of size 1: a broadcast."""
    multiples = constant_value(graph, node.inputs[1])
    shape = graph.info(node.inputs[0]).shape
    if multiples is None or shape is None or len(multiples) != len(shape):
        return False
    return all(int(m) == 1 or d == 1 for m, d in zip(multiples, shape, strict=True))


def same_liveness(ctx: Context, a: list[str], b: list[str]) -> Decision:
    """Ops alive under different control flow (another loop frame, another branch of a Switch)
    never share a kernel: it would wait for a tensor that is dead, or run where one side must
    not. A group's members all have one key, so one member of each side tells."""
    x, y = ctx.liveness[a[0]], ctx.liveness[b[0]]
    if x != y:
        return forbid(f"alive under different control flow ({x} vs {y})")
    return allow()


def same_device(ctx: Context, a: list[str], b: list[str]) -> Decision:
    devices = {ctx.graph.node(n).device for n in a} | {ctx.graph.node(n).device for n in b}
    if len(devices) > 1:
        return forbid(f"crosses devices {sorted(devices)}")
    return allow()


def group_outputs(ctx: Context, members: set[str]) -> list[TensorRef]:
    """Tensors of the group read outside it or fetched, in a stable order."""
    outs = []
    for name in sorted(members, key=ctx.order.__getitem__):
        node = ctx.graph.node(name)
        for i in range(len(node.outputs)):
            ref = node.output(i)
            users = ctx.consumers.get(ref, [])
            if ref in ctx.fetched or any(u not in members for u in users):
                outs.append(ref)
    return outs


def outputs_legality(layout: Layout, outputs: list[TensorRef]) -> Decision:
    """Each output must be written exactly once: dense over the domain, or one value per row."""
    domain, split = layout.domain, layout.split
    for ref in outputs:
        if ref in layout.tiles:
            continue  # each block writes its rows of the matmul
        if ref in layout.slices:
            return forbid(
                f"output {ref} is a window or transpose of an input: a kernel would only copy it"
            )
        concat = layout.concats.get(ref)
        p = layout.placements[concat.parts[0] if concat else ref]
        nontrivial = sorted((a, d) for a, d in zip(p.axes, p.dims, strict=True) if d != 1)
        dense = [(a, d) for a, d in enumerate(domain) if d != 1]
        if p.frame != OUTER and nontrivial == dense:
            continue
        per_row = [(a, d) for a, d in enumerate(domain[:split]) if d != 1]
        if layout.kind in (LayoutKind.ROW, LayoutKind.COLUMN) and nontrivial == per_row:
            continue
        return forbid(
            f"output {ref} {fmt(p.dims)} would be written by several units of the "
            f"{fmt(domain)} domain"
        )
    return allow()


# Library calls whose bias add TensorFlow's remapper/oneDNN fuse into the call itself.
LIBRARY_CALLS = frozenset(
    {
        "MatMul",
        "BatchMatMul",
        "BatchMatMulV2",
        "BatchMatMulV3",
        "Einsum",
        "Conv2D",
        "Conv3D",
        "DepthwiseConv2dNative",
    }
)
_VIEW_OPS = frozenset({"Reshape", "ExpandDims", "Squeeze", "Identity"})
# Kinds of ops that do not count as a group's compute: views, windows and matmuls (a kernel of
# one matmul and its bias add is what the library call is).
NOT_COMPUTE = (OpKind.RESHAPE, OpKind.SLICE, OpKind.MATMUL)


# Activations TensorFlow's remapper fuses with a library op and its bias add (one `_FusedMatMul`
# / `_FusedConv2D` / `_FusedDepthwiseConv2dNative` launch); measured on TF 2.21's CPU kernels.
FUSED_ACTIVATIONS: dict[str, frozenset[str]] = {
    "MatMul": frozenset({"Relu", "Relu6", "Elu", "LeakyRelu", "Tanh", "Sigmoid"}),
    "Conv2D": frozenset({"Relu", "Relu6", "Elu", "LeakyRelu"}),
    "DepthwiseConv2dNative": frozenset({"Relu", "Relu6", "Elu"}),
}
# On a GPU the remapper fuses only a ReLU (cuDNN's convolution-bias-activation, cuBLASLt's
# epilogues; remapper.cc's IsGpuCompatible) and cuBLASLt's GELU: any other activation is a
# kernel of its own there, which stitching it with the matmul saves.
GPU_FUSED_ACTIVATIONS = frozenset({"Relu", "Gelu"})


def fused_activations(library: str, gpu: bool) -> frozenset[str]:
    """The activations TensorFlow runs in one launch with `library` and its bias add."""
    on_cpu = FUSED_ACTIVATIONS.get(library, frozenset())
    return on_cpu & GPU_FUSED_ACTIVATIONS if gpu else on_cpu


def has_cpu_only_epilogues(graph: Graph) -> bool:
    """Whether `graph` has an activation of a library call's bias add that TensorFlow fuses
    into the call on a CPU but not on a GPU (the two plan differently)."""
    for node in graph:
        if node.op in GPU_FUSED_ACTIVATIONS or len(node.inputs) != 1:
            continue
        add = graph.nodes.get(node.inputs[0].node)
        if add is None:
            continue
        library = (
            _library_through_views(graph, add.inputs[0])
            if add.op == "BiasAdd"
            else library_of_epilogue(graph, add)
        )
        if library is not None and node.op in FUSED_ACTIVATIONS.get(library.op, ()):
            return True
    return False


def _library_through_views(graph: Graph, ref: TensorRef) -> Node | None:
    """The matmul or convolution `ref` is the result of, through up to two views."""
    node = graph.nodes.get(ref.node)
    for _ in range(3):
        if node is None:
            return None
        if node.op in LIBRARY_CALLS:
            return node
        if node.op not in _VIEW_OPS or not node.inputs:
            return None
        node = graph.nodes.get(node.inputs[0].node)
    return None


def library_of_epilogue(graph: Graph, node: Node) -> Node | None:
    """The matmul or convolution whose result (through views) `node` adds a bias to — a
    constant, a live variable's value (a Placeholder that is not a graph input) or a value
    computed from those alone (`derived_from_weights`) — if TensorFlow fuses that add into the
    library call; else None. TensorFlow's CPU remapper fuses float32 calls only (16-bit ones
    with oneDNN alone): a 16-bit call's bias add is an op of its own, which a kernel takes."""
    if node.op not in ("Add", "AddV2") or len(node.inputs) != 2:
        return None
    producers = [graph.nodes.get(r.node) for r in node.inputs]
    if any(p is None for p in producers):
        return None
    weights = [i for i, r in enumerate(node.inputs) if derived_from_weights(graph, r)]
    if len(weights) != 1:
        return None
    library = _library_through_views(graph, node.inputs[1 - weights[0]])
    if library is None or library.outputs[0].dtype != "float32":
        return None
    return library


def is_weight(graph: Graph, ref: TensorRef) -> bool:
    """A constant, or (through views) a Placeholder that is not fed: a live variable's value,
    or a read of a variable the function writes (a ReadVariableOp of its handle, a Placeholder
    that is not fed either: its value for the step)."""
    fed = graph.fed()
    for _ in range(4):
        node = graph.nodes.get(ref.node)
        if node is None:
            return False
        if node.op == "Const":
            return True
        if node.op == "Placeholder":
            return ref not in fed
        if node.op == "ReadVariableOp" and node.inputs:
            handle = graph.nodes.get(node.inputs[0].node)
            return handle is not None and handle.op == "Placeholder" and node.inputs[0] not in fed
        if node.op not in _VIEW_OPS or not node.inputs:
            return False
        ref = node.inputs[0]
    return False


# How many computed nodes derived_from_weights follows before giving up (a batch norm's shift
# is ~8; a kernel of many weights' values is one).
_DERIVED_LIMIT = 32


def derived_from_weights(graph: Graph, ref: TensorRef) -> bool:
    """A weight (`is_weight`), or a value computed from weights alone by side-effect-free ops
    (a batch norm's scale `rsqrt(variance + eps) * gamma` of live statistics, a filter scaled
    by it, see passes/scale_live_filters.py): the same for every element of a batch, so
    TensorFlow may fuse its add into a library call as a bias."""
    if is_weight(graph, ref):
        return True
    fed = {r.node for r in graph.fed()}
    seen: set[str] = set()
    computed = 0
    stack = [ref.node]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        node = graph.nodes.get(name)
        if node is None or name in fed:
            return False
        if node.op == "Const" or node.op == "Placeholder":
            continue
        computed += 1
        if computed > _DERIVED_LIMIT:
            return False
        pure = node.op == "StitchedKernel" or not is_stateful(node.op)
        if not pure or not node.inputs or node.control_inputs:
            return False
        stack.extend(r.node for r in node.inputs)
    return True


def is_library_epilogue(graph: Graph, node: Node) -> bool:
    """An add of a bias (a constant or a live variable's value) to a matmul/convolution result
    (through views): TensorFlow fuses it into the library call, so stitching it alone would
    add a launch, not remove one."""
    return library_of_epilogue(graph, node) is not None


def only_library_epilogues(ctx: Context, compute: list[Node]) -> bool:
    """Whether `compute` is nothing but bias adds of library calls, each maybe followed by its
    only reader, an activation TensorFlow fuses with that call too: then TensorFlow runs each
    call and its epilogue as one launch, and a kernel of them would add launches."""
    libraries = {n.name: library_of_epilogue(ctx.graph, n) for n in compute}
    adds = {name for name, lib in libraries.items() if lib is not None}
    for node in compute:
        if node.name in adds:
            continue
        add = ctx.graph.node(node.inputs[0].node) if node.inputs else None
        if add is None or add.name not in adds or len(node.inputs) != 1:
            return False
        library = libraries[add.name]
        fused = fused_activations(library.op if library is not None else "", ctx.gpu)
        if node.op not in fused or ctx.consumers.get(add.output(0), []) != [node.name]:
            return False
    return bool(adds)
