"""What TensorFlow runs on a GPU for convolutions: layouts and fused library calls.

Layouts. On a GPU, Grappler's generic layout optimizer runs float32 NHWC convolutions, poolings,
batch norms and bias adds in NCHW, the layout cuDNN computes float32 convolutions in (TensorFlow
keeps NHWC only where most convolutions are float16 on a Volta or newer GPU). The ops between
them follow where they do not care about the layout (elementwise ops, AddN, Pad, reductions);
a transpose kernel is inserted on every 4-D tensor that crosses between a converted op and one
that is not (an op it does not know, such as StitchedKernel, a Reshape that flattens), once per
tensor and direction. So a chain of convolutions costs no transposes, and a kernel it does not
know between two of them costs two. `layout_transposes` counts them on a graph.

Fused calls. Where TensorFlow's CPU remapper fused a convolution or matmul with the ops after it
(`_FusedConv2D`, `_FusedMatMul`), a GPU runs the call with a bias add and a ReLU as one kernel
(cuDNN's convolution-bias-activation, cuBLASLt's epilogues) and every other fused op (a batch
norm, another activation) as a kernel of its own: `fused_call_kernels`.
"""

from __future__ import annotations

from tf_stitch.fusion.legality import GPU_FUSED_ACTIVATIONS
from tf_stitch.fusion.op_kinds import OpKind, op_kind
from tf_stitch.graph.ir import Graph, Node, TensorRef

# Ops the layout optimizer rewrites to NCHW: their data input 0 is the image.
SENSITIVE = frozenset(
    {
        "Conv2D",
        "DepthwiseConv2dNative",
        "MaxPool",
        "AvgPool",
        "FusedBatchNorm",
        "FusedBatchNormV2",
        "FusedBatchNormV3",
        "BiasAdd",
    }
)
# Layout-agnostic ops besides the elementwise ones: they follow a converted input.
_AGNOSTIC = frozenset({"AddN", "Pad", "PadV2", "MirrorPad", "Identity", "Snapshot"})
_REDUCTIONS = frozenset({"Mean", "Sum", "Max", "Min"})
# Readers of a tensor's shape only: no transpose for them.
_METADATA = frozenset({"Shape", "ShapeN", "Size", "Rank"})
_FLOATS = frozenset({"float32", "float64"})

LIBRARY_CALLS = frozenset({"Conv2D", "DepthwiseConv2dNative", "MatMul", "BatchMatMulV2"})
# What a GPU library call does in its own kernel after the product: a bias add, then a ReLU
# (cuDNN's convolution-bias-activation; cuBLASLt's bias and ReLU/GELU epilogues).
_EPILOGUE_BIAS = frozenset({"BiasAdd", "Add", "AddV2"})


def _rank4_float(graph: Graph, ref: TensorRef) -> bool:
    try:
        info = graph.info(ref)
    except KeyError:
        return False
    return info.rank == 4 and info.dtype in _FLOATS


def _nhwc(node: Node) -> bool:
    fmt = node.attrs.get("data_format", b"NHWC")
    return (fmt.decode() if isinstance(fmt, bytes) else str(fmt)) == "NHWC"


def converted_ops(graph: Graph) -> set[str]:
    """The ops the layout optimizer runs in NCHW."""
    converted: set[str] = set()
    for node in graph.topological_order():
        if not node.inputs or not _rank4_float(graph, node.inputs[0]):
            continue
        sensitive = node.op in SENSITIVE and _nhwc(node)
        if sensitive or (_follows(node) and any(r.node in converted for r in node.inputs)):
            converted.add(node.name)
    return converted


def _follows(node: Node) -> bool:
    return op_kind(node.op) is OpKind.ELEMENTWISE or node.op in _AGNOSTIC | _REDUCTIONS


def layout_transposes(graph: Graph) -> int:
    """Transposes the layout optimizer adds to `graph` on a GPU (see the module docstring)."""
    converted = converted_ops(graph)
    consumers = graph.consumers()
    fetched = graph.fetched()
    crossing: set[tuple[str, TensorRef]] = set()
    for name in converted:
        node = graph.node(name)
        images = node.inputs[:1] if node.op in SENSITIVE else node.inputs
        for ref in images:
            producer = graph.nodes.get(ref.node)
            if producer is None or ref.node in converted or producer.op == "Const":
                continue
            if _rank4_float(graph, ref):
                crossing.add(("in", ref))
        for i in range(len(node.outputs)):
            ref = node.output(i)
            if not _rank4_float(graph, ref):
                continue  # a spatial reduction's [N, C]: the same in either layout
            readers = [
                u
                for u in consumers.get(ref, [])
                if u not in converted and graph.node(u).op not in _METADATA
            ]
            if readers or ref in fetched:
                crossing.add(("out", ref))
    return len(crossing)


def fused_call_kernels(graph: Graph, name: str) -> int:
    """GPU kernels of a library call TensorFlow's CPU remapper fused with the ops up to `name`
    (the fused node takes the name of the last op it absorbed): the call with a bias add and a
    ReLU right after it is one kernel, each other op one more. 2 if `name` is unknown."""
    node = graph.nodes.get(name)
    chain: list[str] = []
    while node is not None and node.op not in LIBRARY_CALLS and len(chain) < 4:
        chain.append(node.op)
        node = graph.nodes.get(node.inputs[0].node) if node.inputs else None
    if node is None:
        return 2
    chain.reverse()  # from the call outwards
    if chain and chain[0] in _EPILOGUE_BIAS:
        chain = chain[1:]
        if chain and chain[0] in GPU_FUSED_ACTIVATIONS:
            chain = chain[1:]
    return 1 + len(chain)
