"""live-batch-norms: on a CPU, a convolution followed by an inference batch norm of live
statistics becomes `Conv2D -> FusedBatchNormV3`, the pattern TensorFlow's remapper fuses into
one `_FusedConv2D` (oneDNN's convolution with the batch norm, and a ReLU after it, as
post-ops).

A frozen model's batch norm is folded into the filter (fold-channel-scales). With variables
live (`optimize()`'s default), its statistics are read at every call, and Keras' batch norm
(`tf.nn.batch_normalization`) arrives as elementwise ops:

    y = conv * s + t,   s = rsqrt(variance + eps) [* gamma],   t = beta - mean * s  (or -mean * s)

which would be a stitched kernel after every convolution (ResNet-50: 106 launches instead of
73 frozen, 0.98x TensorFlow's latency instead of 0.60x). As one FusedBatchNormV3 it costs no
launch of its own; a convolution's own bias before the batch norm goes into its mean (mean -
b, a vector op). Only NHWC float32 Conv2Ds whose result nobody else reads are rewritten
(TensorFlow fuses neither depthwise convolutions nor matmuls with a batch norm); for a GPU's
layout (`conv_layout="NCHW"`) nothing is: cuDNN does not fuse a batch norm either, and the
stitched kernel is then the epilogue's one launch. Nor where this host's TensorFlow runs the
fused call through oneDNN on a CPU without AVX-512, where it is 10x slower than the convolution
and a stitched kernel apart (`fusion/host_cpu.fused_batch_norm_pays`; the plan depends on the
host that optimizes, as a SavedModel converted for another machine's CPU should be converted
there).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tf_stitch.fusion.decision import Record, RecordKind, forbid
from tf_stitch.fusion.host_cpu import fused_batch_norm_pays
from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder
from tf_stitch.passes.decompose_common import channels_first

_VIEWS = frozenset({"Reshape", "ExpandDims", "Squeeze", "Identity"})


@dataclass(frozen=True)
class _BatchNorm:
    bias: Node | None  # conv + b (a convolution's own bias), before the batch norm
    bias_vector: TensorRef | None  # its b
    mul: Node  # conv * s
    add: Node  # ... + t
    scale: TensorRef | None  # gamma
    offset: TensorRef | None  # beta
    mean: TensorRef
    variance: TensorRef
    epsilon: float


@graph_pass("live-batch-norms")
def live_batch_norms(graph: Graph, ctx: PassContext) -> Graph:
    """Conv2D * s + t of a batch norm's statistics -> Conv2D -> FusedBatchNormV3 (CPU)."""
    if ctx.options.conv_layout != "NHWC":
        return graph
    if not fused_batch_norm_pays():
        if any(_convolution(n) for n in graph):
            ctx.records.append(
                Record(
                    "live-batch-norms",
                    forbid(
                        "TensorFlow runs a convolution fused with its batch norm through oneDNN "
                        "here, on a CPU without AVX-512, 10x slower than the two apart: each "
                        "batch norm is stitched after its convolution instead"
                    ),
                    RecordKind.REWRITE,
                )
            )
        return graph
    out = graph.copy()
    readers = out.consumers()
    fetched = out.fetched()
    guard = Guard(out)
    for node in list(out):
        if not _convolution(node) or not guard.removable(node):
            continue
        found = _batch_norm(out, node, readers, fetched)
        if found is not None:
            _rewrite(out, node, found)
    return out


def _convolution(node: Node) -> bool:
    return (
        node.op == "Conv2D"
        and not channels_first(node)
        and node.outputs[0].dtype == "float32"
        and node.outputs[0].shape is not None
        and node.outputs[0].shape[-1] is not None
    )


def _only_reader(graph: Graph, ref: TensorRef, readers: dict, op: str) -> Node | None:
    users = readers.get(ref, [])
    if len(users) != 1:
        return None
    node = graph.node(users[0])
    return node if node.op == op and len(node.inputs) == 2 and not node.control_inputs else None


def _other(node: Node, ref: TensorRef) -> TensorRef | None:
    a, b = node.inputs
    if a == b:
        return None
    return b if a == ref else a


def _batch_norm(
    graph: Graph, conv: Node, readers: dict, fetched: set[TensorRef]
) -> _BatchNorm | None:
    shape = conv.outputs[0].shape
    channels = shape[-1] if shape else None
    if channels is None:
        return None
    result = conv.output(0)
    bias = _only_reader(graph, result, readers, "AddV2")
    b = None
    if bias is not None:  # conv + b: the batch norm's mean becomes mean - b
        b = _other(bias, result)
        if b is None or not _vector(graph, b, channels) or bias.output(0) in fetched:
            return None
        result = bias.output(0)
    mul = _only_reader(graph, result, readers, "Mul")
    if mul is None or mul.output(0) in fetched:
        return None
    add = _only_reader(graph, mul.output(0), readers, "AddV2")
    if add is None or add.outputs[0].shape != conv.outputs[0].shape:
        return None
    s, t = _other(mul, result), _other(add, mul.output(0))
    if s is None or t is None or not all(_vector(graph, r, channels) for r in (s, t)):
        return None
    parts = _scale(graph, s)
    if parts is None:
        return None
    variance, epsilon, scale = parts
    shift = _shift(graph, t, s)
    if shift is None:
        return None
    mean, offset = shift
    if not all(_vector(graph, r, channels) for r in (variance, mean, scale, offset) if r):
        return None
    return _BatchNorm(bias, b, mul, add, scale, offset, mean, variance, epsilon)


def _vector(graph: Graph, ref: TensorRef, channels: int) -> bool:
    """A [channels] vector, or one of shape [1, ..., 1, channels] (Keras' batch norm with an
    explicit `axis=3` reshapes its statistics so)."""
    info = graph.info(ref)
    shape = info.shape
    return (
        info.dtype == "float32"
        and shape is not None
        and len(shape) in (1, 4)
        and shape[-1] == channels
        and all(d == 1 for d in shape[:-1])
    )


def _flat(graph: Graph, b: NodeBuilder, ref: TensorRef, channels: int) -> TensorRef:
    """`ref` as a [channels] vector: itself, the vector it is a view of, or a Reshape of it."""
    if graph.info(ref).shape == (channels,):
        return ref
    producer = graph.node(ref.node)
    if producer.op in _VIEWS and producer.inputs:
        source = producer.inputs[0]
        if graph.info(source).shape == (channels,):
            return source
    shape = b.const(np.asarray([channels], np.int32), "int32", "vector_shape")
    return b.op(
        "Reshape",
        [ref, shape],
        TensorInfo("float32", (channels,)),
        {"T": DType("float32"), "Tshape": DType("int32")},
    )


def _scale(graph: Graph, s: TensorRef) -> tuple[TensorRef, float, TensorRef | None] | None:
    """s = rsqrt(variance + eps) [* gamma] -> (variance, eps, gamma)."""
    node = graph.node(s.node)
    gamma = None
    if node.op == "Mul" and len(node.inputs) == 2:
        for i in (0, 1):
            inner = graph.node(node.inputs[i].node)
            if inner.op == "Rsqrt":
                gamma, node = node.inputs[1 - i], inner
                break
        else:
            return None
    if node.op != "Rsqrt":
        return None
    plus = graph.node(node.inputs[0].node)
    if plus.op not in ("Add", "AddV2") or len(plus.inputs) != 2:
        return None
    for i in (0, 1):
        eps = constant_value(graph, plus.inputs[i])
        if eps is not None and eps.size == 1 and float(eps.reshape(-1)[0]) >= 0:
            return plus.inputs[1 - i], float(np.float32(eps.reshape(-1)[0])), gamma
    return None


def _shift(graph: Graph, t: TensorRef, s: TensorRef) -> tuple[TensorRef, TensorRef | None] | None:
    """t = beta - mean * s, -(mean * s) or (-mean) * s -> (mean, beta)."""
    node = graph.node(t.node)
    if node.op == "Mul" and len(node.inputs) == 2 and s in node.inputs:
        negated = _other(node, s)
        neg = None if negated is None else graph.node(negated.node)
        return (neg.inputs[0], None) if neg is not None and neg.op == "Neg" else None
    if node.op == "Sub" and len(node.inputs) == 2:
        beta, product = node.inputs
    elif node.op == "Neg":
        beta, product = None, node.inputs[0]
    else:
        return None
    times = graph.node(product.node)
    if times.op != "Mul" or len(times.inputs) != 2 or s not in times.inputs:
        return None
    mean = _other(times, s)
    return None if mean is None else (mean, beta)


def _rewrite(graph: Graph, conv: Node, bn: _BatchNorm) -> None:
    shape = conv.outputs[0].shape
    assert shape is not None and shape[-1] is not None  # checked by _convolution
    channels = shape[-1]
    b = NodeBuilder(graph, bn.add.name + "_fused", conv.device)

    def flat(ref: TensorRef) -> TensorRef:
        return _flat(graph, b, ref, channels)

    ones = flat(bn.scale) if bn.scale else b.const(np.ones(channels, np.float32), "float32")
    zeros = flat(bn.offset) if bn.offset else b.const(np.zeros(channels, np.float32), "float32")
    vec = TensorInfo("float32", (channels,))
    mean = flat(bn.mean)
    if bn.bias_vector is not None:  # (conv + b - mean) * s + beta
        mean = b.binary("Sub", mean, flat(bn.bias_vector), (channels,))
    node = Node(
        graph.unique_name(f"{bn.add.name}/batch_norm"),
        "FusedBatchNormV3",
        [conv.output(0), ones, zeros, mean, flat(bn.variance)],
        {
            "T": DType("float32"),
            "U": DType("float32"),
            "epsilon": bn.epsilon,
            "exponential_avg_factor": 1.0,
            "data_format": b"NHWC",
            "is_training": False,
        },
        [conv.outputs[0], vec, vec, vec, vec, TensorInfo("float32", None)],
        device=conv.device,
    )
    graph.add(node)
    graph.replace_uses(bn.add.output(0), node.output(0))
    graph.remove([n.name for n in (bn.add, bn.mul, bn.bias) if n is not None])
