"""The kernels an optimized graph would launch on a GPU, from the ops its CPU run executed.

No GPU is needed: the ops come from a real profiler trace of the optimized function on this
host (`launches.op_launches.OpLaunches.runs`, one entry per node that ran), and each is mapped
to what TensorFlow runs for it on a GPU:

- a `StitchedKernel` with CUDA source is one kernel (`codegen/cuda.py`); one without CUDA
  source runs its CPU kernel on the host (counted as one launch, and named in the notes);
- an op whose inputs are all int32 (outputs int32 or bool) runs on the host: TensorFlow
  registers the GPU kernels of int32 ops with every argument in host memory (shape and index
  arithmetic), so it launches no GPU kernel; inside a loop's body or condition (a library
  function, `LoopNodes`) the op's type attribute says so (a loop's counter and bound);
- CPU-only variants (oneDNN's `_Mkl*`) are counted as the op they replace;
- convolutions and poolings are one kernel each, in the NCHW layout Grappler's layout
  optimizer gives them on a GPU, plus the transposes it inserts where their tensors meet ops it
  does not convert (`gpu_layout.py`, counted on the graph); a call the CPU remapper fused with
  the ops after it (`_FusedConv2D`, `_FusedMatMul`) is one kernel with its bias add and ReLU,
  and one more for each other op it absorbed (`gpu_layout.fused_call_kernels`);
- the TensorList ops of a loop that only move references (`LIST_OPS`: push, pop, get, set)
  run on the host;
- an `AssignVariableOp` whose value nothing else reads (a value computed in the step) launches
  none: TensorFlow's kernel takes over the value's buffer instead of copying it;
- a `Slice` of whole aligned rows of its input's first axis launches none: TensorFlow hands
  out a view of them (`is_row_view`);
- ops known to launch several kernels on a GPU are counted by `GPU_KERNELS` or, for Einsum,
  by `einsum_kernels`; every other op is one kernel.

Where TensorFlow's choice depends on the GPU, the larger count is taken (a count that is too
high can only understate tf_stitch's advantage).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field

from tensorflow.core.framework import function_pb2, node_def_pb2, types_pb2

from tf_stitch.fusion.integers import runs_on_the_host
from tf_stitch.graph.callable import IMPORT_SCOPE
from tf_stitch.graph.ir import DTYPE_BYTES, Graph, Node, TensorRef
from tf_stitch.graph.values import constant_value
from tf_stitch.graph.variable_writes import ASSIGN_OP
from tf_stitch.launches.gpu_layout import fused_call_kernels, layout_transposes
from tf_stitch.launches.op_launches import OpLaunches

STITCHED_OP = "StitchedKernel"

# TF ops known to launch more than one GPU kernel per run, and why.
GPU_KERNELS: dict[str, tuple[int, str]] = {
    "Softmax": (3, "row max, row sum of exponentials, normalization (softmax_op_gpu)"),
    "LogSoftmax": (3, "row max, row sum of exponentials, normalization (softmax_op_gpu)"),
    "Einsum": (4, "without its equation: transposes of both operands and the result, a GEMM"),
}
# Library calls the CPU remapper fused with the ops after them (gpu_layout.fused_call_kernels).
_FUSED_CALLS = frozenset(
    {"_FusedConv2D", "_FusedDepthwiseConv2dNative", "_FusedMatMul", "_FusedBatchMatMulV2"}
)
LAYOUT_TRANSPOSE = "Transpose (layout optimizer)"
# TensorList ops that only move references to tensors in the list (a host-side vector): the
# GPU kernels of list_kernels.h push, set and hand out elements with `set_output`, launching a
# kernel only to make zeros for an element never set (a loop's lists are filled before read).
LIST_OPS = frozenset(
    {
        "TensorListPushBack",
        "TensorListPopBack",
        "TensorListGetItem",
        "TensorListSetItem",
        "TensorListReserve",
        "EmptyTensorList",
        "TensorListLength",
        "TensorListElementShape",
    }
)


@dataclass(frozen=True)
class GpuLaunches:
    """GPU kernels per step: `total`, by GPU op type, and the ops that would run on the host."""

    total: int
    by_type: dict[str, int] = field(default_factory=dict)
    on_host: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def gpu_op_type(op: str) -> str:
    """The op a GPU runs in place of a CPU-only variant (`_MklNativeConv2D` -> `Conv2D`,
    `_MklNativeFusedConv2D` -> `_FusedConv2D`); a kernel that also writes variables is one
    kernel, its writes taking over its outputs' buffers (graph/variable_writes.py)."""
    if op == ASSIGN_OP:
        return STITCHED_OP
    for prefix in ("_MklNative", "_Mkl"):
        if op.startswith(prefix):
            rest = op[len(prefix) :]
            return "_" + rest if rest.startswith(("Fused", "PadWith")) else rest
    return op


def einsum_kernels(equation: str) -> int:
    """Kernels TensorFlow's Einsum op launches on a GPU for a two-operand `equation`.

    Modelled on its implementation: each operand is transposed (one kernel, skipped when the
    permutation is the identity) so its labels are grouped batch, free, contracted (or batch,
    contracted, free), each group in order of first appearance; a label summed out of only one
    operand costs a reduction kernel; one batch matmul; a transpose of the result unless the
    output is batch, free of the left, free of the right. One operand: one kernel. Ellipses:
    every transpose is assumed.
    """
    spec = equation.replace(" ", "")
    lhs, arrow, out = spec.partition("->")
    operands = lhs.split(",")
    if not arrow or len(operands) > 2 or not all(operands):
        raise ValueError(f"unsupported einsum equation {equation!r}")
    if len(operands) == 1:
        return 1
    if "." in spec:
        return 4
    a, b = operands
    order = {label: i for i, label in enumerate(dict.fromkeys(a + b + out))}

    def ordered(labels: Collection[str]) -> str:
        return "".join(sorted(labels, key=order.__getitem__))

    batch = ordered(set(a) & set(b) & set(out))
    contract = ordered((set(a) & set(b)) - set(out))
    kernels = 1
    for operand, other in ((a, b), (b, a)):
        free = ordered(set(operand) & (set(out) - set(other)))
        reduced = set(operand) - set(other) - set(out)
        kernels += 1 if reduced else 0
        kept = "".join(label for label in operand if label not in reduced)
        if kept not in (batch + free + contract, batch + contract + free):
            kernels += 1
    free_a, free_b = (ordered(set(x) & (set(out) - set(y))) for x, y in ((a, b), (b, a)))
    if out != batch + free_a + free_b:
        kernels += 1
    return kernels


def _node(graph: Graph, name: str) -> Node | None:
    name = name.removeprefix(IMPORT_SCOPE + "/")
    return graph.nodes.get(name)


# A node of a While's body or condition runs (and is traced) as `<while>/body/_<k>/<node>`.
_IN_LOOP = re.compile(r"^(.*?)/(body|cond)/_\d+/(.*)$")


class LoopNodes:
    """The nodes of `graph`'s loop bodies and conditions (library functions), found by the
    names a trace gives them, nested loops included."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self._functions: dict[str, dict[str, node_def_pb2.NodeDef]] | None = None

    def _function(self, name: str) -> dict[str, node_def_pb2.NodeDef]:
        if self._functions is None:
            lib = function_pb2.FunctionDefLibrary()
            lib.ParseFromString(self.graph.library)
            self._functions = {
                f.signature.name: {n.name: n for n in f.node_def} for f in lib.function
            }
        return self._functions.get(name, {})

    def find(self, traced: str) -> node_def_pb2.NodeDef | None:
        match = _IN_LOOP.match(traced.removeprefix(IMPORT_SCOPE + "/"))
        if match is None:
            return None
        loop, part, inner = match.groups()
        node = self.graph.nodes.get(loop)
        ref = node.attrs.get(part) if node is not None else None
        nodes = self._function(getattr(ref, "name", ""))
        while inner not in nodes and (match := _IN_LOOP.match(inner)) is not None:
            loop, part, inner = match.groups()
            nested = nodes.get(loop)
            if nested is None or part not in nested.attr:
                return None
            nodes = self._function(nested.attr[part].func.name)
        return nodes.get(inner)


def runs_on_host_in_loop(node: node_def_pb2.NodeDef) -> bool:
    """`runs_on_host` for a node of a loop's function, from its type attribute: an op on int32
    (a loop's counters and bounds) keeps its arguments in host memory."""
    return "T" in node.attr and node.attr["T"].type == types_pb2.DT_INT32


def runs_on_host(graph: Graph, node: Node) -> bool:
    """Whether TensorFlow runs `node` on the host on a GPU machine: every data input int32 and
    every output int32 or bool (TF keeps such kernels' arguments in host memory)."""
    try:
        return runs_on_the_host(graph, node)
    except KeyError:  # an input the graph does not have
        return False


# TensorFlow's Slice hands out a view (`input.Slice`, no kernel) when it cuts whole rows of its
# input's first axis and a row is a multiple of EIGEN_MAX_ALIGN_BYTES (slice_op.cc,
# IsDim0SliceAligned; 64 is the largest an x86 build uses, so no view is counted that is not one).
_ALIGN_BYTES = 64


def is_row_view(graph: Graph, node: Node) -> bool:
    """Whether `node` is a Slice TensorFlow runs as a view: whole rows of axis 0 of a tensor
    whose rows are aligned (an unrolled recurrence's step of its batched input projection)."""
    if node.op != "Slice" or len(node.inputs) != 3:
        return False
    begin, size = (constant_value(graph, r) for r in node.inputs[1:3])
    shape = graph.info(node.inputs[0]).shape
    itemsize = DTYPE_BYTES.get(graph.info(node.inputs[0]).dtype)
    if begin is None or size is None or shape is None or len(shape) < 2 or itemsize is None:
        return False
    for axis in range(1, len(shape)):
        whole = int(size[axis]) == -1 or (shape[axis] is not None and size[axis] == shape[axis])
        if int(begin[axis]) != 0 or not whole:
            return False
    row = math.prod(d for d in shape[1:] if d is not None) * itemsize
    return row % _ALIGN_BYTES == 0


# Producers whose output an AssignVariableOp cannot take over: it is held elsewhere too (a
# constant of the graph, a variable's own buffer, a function argument).
# A view (Identity, Reshape, ...) shares its input's buffer, so it is taken as held too.
_HELD = frozenset(
    {"Const", "Placeholder", "ReadVariableOp", "_Arg", "VarHandleOp", "Identity", "IdentityN"}
    | {"Reshape", "ExpandDims", "Squeeze", "Snapshot"}
)


def adopts_value(
    graph: Graph, node: Node, readers: dict[TensorRef, list[str]] | None = None
) -> bool:
    """Whether an AssignVariableOp takes over its value's buffer rather than copying it: it
    does when it is the value's last user (resource_variable_ops.cc, `forward_input`), i.e. a
    value computed in the step that nothing else reads. `readers`: `graph.consumers()`."""
    if len(node.inputs) != 2:
        return False
    value = node.inputs[1]
    producer = graph.nodes.get(value.node)
    if producer is None or producer.op in _HELD:
        return False
    return len((graph.consumers() if readers is None else readers).get(value, [])) == 1


def count_gpu_launches(ops: OpLaunches, graph: Graph, cuda_kernels: Collection[str]) -> GpuLaunches:
    """GPU kernels per step of the optimized `graph`, whose CPU run executed `ops`.

    `cuda_kernels` names the StitchedKernel nodes that have CUDA source. Ops are looked up in
    `graph` by node name (for dtypes and attributes); ops Grappler created at run time are not
    in it and are counted by type (the notes say how many).
    """
    by_type: Counter[str] = Counter()
    on_host: Counter[str] = Counter()
    notes: list[str] = []
    unknown: Counter[str] = Counter()
    adopted = views = 0
    consumers: list[dict[TensorRef, list[str]]] = []

    def readers() -> dict[TensorRef, list[str]]:  # the graph's, once, if an assign ran
        if not consumers:
            consumers.append(graph.consumers())
        return consumers[0]

    loops = LoopNodes(graph)
    for run, times in ops.runs.items():
        op = gpu_op_type(run.op)
        node = _node(graph, run.node)
        looped = loops.find(run.node) if node is None else None
        if node is None and looped is None and op != STITCHED_OP:
            unknown[op] += times
        if op == STITCHED_OP:
            name = run.node.removeprefix(IMPORT_SCOPE + "/")
            in_body = looped.name if looped is not None else None  # a loop body's kernel
            if name not in cuda_kernels and in_body not in cuda_kernels:
                notes.append(f"{name}: no CUDA source, its CPU kernel runs on the host")
            kernels = 1
        elif (
            op in LIST_OPS
            or (node is not None and runs_on_host(graph, node))
            or (looped is not None and runs_on_host_in_loop(looped))
        ):
            on_host[op] += times
            continue
        elif op == "AssignVariableOp" and node is not None and adopts_value(graph, node, readers()):
            adopted += times
            continue
        elif node is not None and is_row_view(graph, node):
            views += times
            continue
        elif op == "Einsum" and node is not None:
            equation = node.attrs.get("equation", b"")
            kernels = einsum_kernels(equation.decode() if isinstance(equation, bytes) else "")
        elif op in _FUSED_CALLS:
            kernels = fused_call_kernels(graph, run.node.removeprefix(IMPORT_SCOPE + "/"))
        elif op.startswith("_PadWith"):  # the Pad is a kernel of its own on a GPU
            fused = op.startswith("_PadWithFused")
            name = run.node.removeprefix(IMPORT_SCOPE + "/")
            kernels = 1 + (fused_call_kernels(graph, name) if fused else 1)
        else:
            kernels = GPU_KERNELS.get(op, (1, ""))[0]
        by_type[op] += kernels * times
    if adopted:
        notes.append(f"{adopted} AssignVariableOp took over their value's buffer: no kernel")
    if views:
        notes.append(f"{views} Slice of aligned leading rows: views, no kernel")
    transposes = layout_transposes(graph)
    if transposes:
        by_type[LAYOUT_TRANSPOSE] += transposes
    if unknown:
        listed = ", ".join(f"{op} x{n}" for op, n in sorted(unknown.items()))
        notes.append(
            f"ops not in the optimized graph or its loops (Grappler made them), by type: {listed}"
        )
    return GpuLaunches(
        total=by_type.total(),
        by_type=dict(sorted(by_type.items())),
        on_host=dict(sorted(on_host.items())),
        notes=notes,
    )
