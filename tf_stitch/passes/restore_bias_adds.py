"""restore-bias-adds: a bias add left to TensorFlow is a `BiasAdd` again.

decompose-bias-add turns `BiasAdd` into `AddV2` so the planner sees one kind of add. Where the
planner leaves such an add to TensorFlow (the epilogue of a matmul or convolution, which the
remapper fuses into the library call), it must look as TensorFlow wrote it: Grappler's
arithmetic optimizer moves a `MaxPool` above a `Relu` (`MaxPool(Relu(x))` -> `Relu(MaxPool(x))`)
unless the Relu reads a `BiasAdd`, and then the remapper can no longer fuse that Relu with the
convolution (VGG16: 5 extra Relu launches, one per block). Only an add of a vector of the
result's last (channel) dimension to a MatMul, Conv2D or DepthwiseConv2dNative result is
rewritten, a constant, a live variable's (see graph/freeze.py) or one computed from weights
alone (passes/scale_live_filters.py); for an NCHW convolution (passes/nchw_layout.py), of a
`[1, C, 1, 1]` or `[C, 1, 1]` one (the bias laid out for NCHW): an NCHW `BiasAdd`.
"""

from __future__ import annotations

import numpy as np

from tf_stitch.fusion.legality import derived_from_weights
from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder

_LIBRARY = ("MatMul", "Conv2D", "DepthwiseConv2dNative")


@graph_pass("restore-bias-adds")
def restore_bias_adds(graph: Graph, ctx: PassContext) -> Graph:
    """Rewrites AddV2(library result, constant [C]) as BiasAdd(library result, constant)."""
    out = graph.copy()
    guard = Guard(out)
    for node in list(out):
        if node.op not in ("Add", "AddV2") or len(node.inputs) != 2 or not guard.rewritable(node):
            continue
        producers = [out.nodes.get(r.node) for r in node.inputs]
        library = [i for i, p in enumerate(producers) if p is not None and p.op in _LIBRARY]
        if len(library) != 1:
            continue
        x, bias = node.inputs[library[0]], node.inputs[1 - library[0]]
        shape = out.info(x).shape
        value = constant_value(out, bias)
        dtype = node.outputs[0].dtype
        if shape is None or not shape or out.info(bias).dtype != dtype:
            continue
        if node.outputs[0].shape != shape:
            continue
        fmt = producers[library[0]].attrs.get("data_format", b"NHWC")  # type: ignore[union-attr]
        if value is None:  # a live variable's bias (or one computed from weights alone)
            live = _live_bias(out, node, bias, shape, fmt)
            if live is None:
                continue
            bias = live
        elif fmt == b"NCHW":
            channels = shape[1]
            if channels is None or value.shape not in ((1, channels, 1, 1), (channels, 1, 1)):
                continue
            bias = NodeBuilder(out, node.name, node.device).const(value.reshape(-1), dtype, "bias")
        elif shape[-1] is None or value.shape != (shape[-1],):
            continue
        node.op = "BiasAdd"
        node.inputs = [x, bias]
        node.attrs = {"T": DType(dtype), "data_format": fmt}
    return out


def _live_bias(
    graph: Graph, node: Node, bias: TensorRef, shape: tuple, fmt: object
) -> TensorRef | None:
    """A bias that is not a constant as BiasAdd's [C] operand: a [C] vector of a channels-last
    result, or the [1, C, 1, 1] / [C, 1, 1] view of one for an NCHW convolution (the vector
    itself, or a Reshape of it); None if it is not computed from weights alone."""
    if not derived_from_weights(graph, bias):
        return None
    got = graph.info(bias).shape
    if fmt != b"NCHW":
        return bias if got == shape[-1:] else None
    channels = shape[1]
    if channels is None or got not in ((1, channels, 1, 1), (channels, 1, 1)):
        return None
    producer = graph.node(bias.node)
    if producer.op == "Reshape" and graph.info(producer.inputs[0]).shape == (channels,):
        return producer.inputs[0]
    b = NodeBuilder(graph, node.name, node.device)
    target = b.const(np.asarray([channels], np.int32), "int32", "bias_shape")
    dtype = graph.info(bias).dtype
    return b.op(
        "Reshape",
        [bias, target],
        TensorInfo(dtype, (channels,)),
        {"T": DType(dtype), "Tshape": DType("int32")},
    )
