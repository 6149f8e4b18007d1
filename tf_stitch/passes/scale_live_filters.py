"""scale-live-filters: for a GPU, a convolution's batch norm of live statistics is folded into
its filter at run time.

    conv(x, W) [+ b] * s [+ t]   ->   conv(x, W * s) + (b * s + t)

fold-channel-scales does this once, at optimize time, when W, b, s and t are constants. With
variables live (`optimize()`'s default) they are read at every call, and each batch norm would
be a stitched kernel after its convolution (live ResNet-50 on a GPU: 53 cuDNN calls and 97
kernels, against 75 launches frozen), because cuDNN fuses a bias and an activation into a
convolution but not a per-channel scale. Here the scale goes into the filter instead: `W * s`
and `b * s + t` read weights only, so they run at the start of the step, for every convolution
at once, as two bundled kernels (fusion/bundles.py: the scales and shifts, then every filter
times its scale), and each convolution is left with a bias add of a value computed from
weights, which TensorFlow fuses into the cuDNN call with the activation after it
(restore-bias-adds makes it a BiasAdd). Live ResNet-50's GPU model: 155 launches -> 79.

Only on a GPU (`Options.conv_layout == "NCHW"`, before nchw-layout): on a CPU the batch norm
of a Conv2D becomes a FusedBatchNormV3 that oneDNN fuses (live-batch-norms), and rescaling
every filter at every call would read and write all the weights again. A chain is rewritten
only when the filter is a weight (`legality.is_weight`), `s` and the optional `b`, `t` are
per-output-channel vectors computed from weights alone (`legality.derived_from_weights`), not
all of them constants (those are fold-channel-scales'), and each intermediate value has the
next op of the chain as its only reader.
"""

from __future__ import annotations

import numpy as np

from tf_stitch.fusion.legality import derived_from_weights, is_weight
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder
from tf_stitch.passes.decompose_common import channels_first
from tf_stitch.passes.fold_channel_scales import chain_operand

_ADDS = ("Add", "AddV2", "BiasAdd")
_LIBRARY = ("Conv2D", "DepthwiseConv2dNative", "MatMul")

Readers = dict[TensorRef, list[str]]


@graph_pass("scale-live-filters")
def scale_live_filters(graph: Graph, ctx: PassContext) -> Graph:
    """conv(x, W) [+ b] * s [+ t] of live weights -> conv(x, W * s) + (b * s + t) (GPU)."""
    if ctx.options.conv_layout != "NCHW":
        return graph
    out = graph.copy()
    readers = out.consumers()
    for node in list(out):
        if _library(out, node):
            _scale(out, node, readers)
    return out


def _library(graph: Graph, node: Node) -> bool:
    """A float32 matmul or channels-last convolution of a weight, its output channels last."""
    if node.op not in _LIBRARY or node.control_inputs or len(node.inputs) != 2:
        return False
    if node.op == "MatMul" and node.attrs.get("transpose_a", False):
        return False
    if node.op != "MatMul" and channels_first(node):
        return False
    info = node.outputs[0]
    return (
        info.dtype == "float32"
        and info.shape is not None
        and len(info.shape) > 0
        and info.shape[-1] is not None
        and _known(graph.info(node.inputs[1]).shape)
        and is_weight(graph, node.inputs[1])
    )


def _known(shape: tuple | None) -> bool:
    return shape is not None and all(d is not None for d in shape)


def _channels(lib: Node) -> int:
    """The library call's output channels (known: checked by `_library`)."""
    shape = lib.outputs[0].shape
    assert shape is not None and shape[-1] is not None
    return int(shape[-1])


def _scale(graph: Graph, lib: Node, readers: Readers) -> None:
    channels = _channels(lib)

    def step(ref: TensorRef, ops: tuple[str, ...]) -> tuple[Node | None, TensorRef | None]:
        link = chain_operand(graph, ref, readers.get(ref, []), ops)
        if link is None or not _channel_vector(graph, link[1], channels):
            return None, None
        return link

    bias_node, bias = step(lib.output(0), _ADDS)
    after_bias = bias_node.output(0) if bias_node is not None else lib.output(0)
    mul, s = step(after_bias, ("Mul",))
    if mul is None or s is None:
        return
    shift_node, shift = step(mul.output(0), _ADDS)
    operands = [lib.inputs[1], s, *(r for r in (bias, shift) if r is not None)]
    if all(constant_value(graph, r) is not None for r in operands):
        return  # fold-channel-scales' case
    last = shift_node or mul
    b = NodeBuilder(graph, lib.name, lib.device)
    vector = _flat(graph, b, s, channels)
    lib.inputs[1] = _scaled_filter(graph, b, lib, vector)
    offset = None
    if bias is not None:
        offset = b.binary("Mul", _flat(graph, b, bias, channels), vector, (channels,))
    if shift is not None:
        t = _flat(graph, b, shift, channels)
        offset = t if offset is None else b.binary("AddV2", offset, t, (channels,))
    replacement = lib.output(0)
    if offset is not None:
        replacement = b.binary("AddV2", replacement, offset, last.outputs[0].shape)
    graph.replace_uses(last.output(0), replacement)
    graph.remove([n.name for n in (bias_node, mul, shift_node) if n is not None])


def _channel_vector(graph: Graph, ref: TensorRef, channels: int) -> bool:
    """A float32 [channels] or [1, ..., 1, channels] value computed from weights alone."""
    info = graph.info(ref)
    shape = info.shape
    return (
        info.dtype == "float32"
        and shape is not None
        and len(shape) >= 1
        and shape[-1] == channels
        and all(d == 1 for d in shape[:-1])
        and derived_from_weights(graph, ref)
    )


def _flat(graph: Graph, b: NodeBuilder, ref: TensorRef, channels: int) -> TensorRef:
    """`ref` (a channel vector) as shape [channels]."""
    if graph.info(ref).shape == (channels,):
        return ref
    return _reshape(b, ref, (channels,))


def _reshape(b: NodeBuilder, ref: TensorRef, shape: tuple[int, ...]) -> TensorRef:
    target = b.const(np.asarray(shape, np.int32), "int32", "scale_shape")
    return b.op(
        "Reshape",
        [ref, target],
        TensorInfo("float32", shape),
        {"T": DType("float32"), "Tshape": DType("int32")},
    )


def _scaled_filter(graph: Graph, b: NodeBuilder, lib: Node, scale: TensorRef) -> TensorRef:
    """The filter with output channel c multiplied by scale[c]."""
    filt = lib.inputs[1]
    shape = graph.info(filt).shape
    assert shape is not None and _known(shape)  # checked by _library
    if lib.op == "MatMul" and lib.attrs.get("transpose_b", False):  # [N, K]
        scale = _reshape(b, scale, (_channels(lib), 1))
    elif lib.op == "DepthwiseConv2dNative":  # [H, W, I, M]: output channel i * M + m
        scale = _reshape(b, scale, tuple(int(d or 0) for d in shape[2:]))
    return b.binary("Mul", filt, scale, shape)
