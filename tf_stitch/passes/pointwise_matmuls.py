"""pointwise-matmuls: a 1x1 convolution of a 1x1 image is a matmul of its rows.

    Conv2D(x [N, 1, 1, C], W [1, 1, C, K])
        ->  Reshape(MatMul(Reshape(x, [-1, C]), W [C, K]), [-1, 1, 1, K])

Squeeze-and-excitation blocks (EfficientNet, MobileNetV3) pool an image to [N, 1, 1, C] and
run two such convolutions on it. As convolutions they are library calls (on a GPU, three
launches each in NHWC); as small matmuls the planner can stitch them with the pooling before
them and the activations between them (a matmul tile). A bias add and a ReLU-like activation
(fused with a matmul by TensorFlow's remapper on a CPU and a GPU) move with it, before the
reshape back, so that the remapper still sees them next to the call. Only NHWC float32
convolutions with constant weights, unit strides and dilations, and a statically 1x1 input
image are rewritten (padding cannot matter for a 1x1 filter).
"""

from __future__ import annotations

import numpy as np

from tf_stitch.graph.ir import AttrList, DType, Graph, Node, TensorInfo
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder

# The activations TensorFlow fuses with a matmul and its bias on both kinds of device.
_MOVED_ACTIVATIONS = ("Relu", "Relu6", "Elu", "LeakyRelu")


@graph_pass("pointwise-matmuls")
def pointwise_matmuls(graph: Graph, ctx: PassContext) -> Graph:
    """Rewrites 1x1 convolutions of 1x1 images as matmuls."""
    out = graph.copy()
    for node in list(out):
        weights = _pointwise_weights(out, node)
        if weights is not None:
            _rewrite(out, node, weights)
    return out


def _attr(node: Node, key: str, default: object) -> object:
    value = node.attrs.get(key, default)
    return value.decode() if isinstance(value, bytes) else value


def _pointwise_weights(graph: Graph, node: Node) -> np.ndarray | None:
    if node.op != "Conv2D" or node.control_inputs or len(node.inputs) != 2:
        return None
    if _attr(node, "data_format", "NHWC") != "NHWC" or node.outputs[0].dtype != "float32":
        return None
    for key in ("strides", "dilations"):
        value = node.attrs.get(key)
        items = value.items if isinstance(value, AttrList) else (1, 1, 1, 1)
        if any(int(v) != 1 for v in items):
            return None
    if _attr(node, "padding", "VALID") == "EXPLICIT":
        return None
    shape = graph.info(node.inputs[0]).shape
    if shape is None or len(shape) != 4 or shape[1:3] != (1, 1) or shape[3] is None:
        return None
    weights = constant_value(graph, node.inputs[1])
    if weights is None or weights.dtype != np.float32 or weights.shape[:2] != (1, 1):
        return None
    return weights


def _epilogue(graph: Graph, conv: Node, kernels: int) -> list[tuple[Node, np.ndarray | None]]:
    """The bias add (with its [K] constant) and the activation reading the convolution's result
    in a chain, each the only reader of what it reads, if the activation is one TensorFlow fuses
    with a matmul and its bias on a CPU and a GPU: they move before the reshape back, next to the
    matmul, where the remapper fuses them with it. Otherwise nothing moves: a bias add with a
    sigmoid (or alone) is better stitched with what follows it."""
    readers = graph.consumers()
    fetched = graph.fetched()
    chain: list[tuple[Node, np.ndarray | None]] = []
    ref = conv.output(0)
    for ops in (("Add", "AddV2", "BiasAdd"), _MOVED_ACTIVATIONS):
        users = readers.get(ref, [])
        if len(users) != 1 or ref in fetched:
            break
        node = graph.node(users[0])
        if node.op not in ops or node.control_inputs:
            break
        bias = None
        if node.op in ("Add", "AddV2", "BiasAdd"):
            if len(node.inputs) != 2 or _attr(node, "data_format", "NHWC") != "NHWC":
                break
            other = node.inputs[1] if node.inputs[0] == ref else node.inputs[0]
            value = constant_value(graph, other)
            if value is None or value.dtype != np.float32 or value.size != kernels:
                break
            if value.ndim > 1 and value.shape[:-1] != (1,) * (value.ndim - 1):
                break
            if node.outputs[0].shape != graph.info(ref).shape:
                break
            bias = value.reshape(kernels)
        elif len(node.inputs) != 1:
            break
        chain.append((node, bias))
        ref = node.output(0)
    return chain if len(chain) == 2 else []  # a bias add alone is better stitched with what follows


def _rewrite(graph: Graph, conv: Node, weights: np.ndarray) -> None:
    channels, kernels = weights.shape[2], weights.shape[3]
    batch = graph.info(conv.inputs[0]).shape[0]  # type: ignore[index]
    chain = _epilogue(graph, conv, kernels)
    b = NodeBuilder(graph, conv.name, conv.device)
    reshape = {"T": DType("float32"), "Tshape": DType("int32")}
    rows_info = TensorInfo("float32", (batch, kernels))
    rows = b.op(
        "Reshape",
        [conv.inputs[0], b.const(np.asarray([-1, channels], np.int32), "int32", "rows_shape")],
        TensorInfo("float32", (batch, channels)),
        reshape,
        base="rows",
    )
    matrix = b.const(weights.reshape(channels, kernels), "float32", "weights")
    value = b.op(
        "MatMul",
        [rows, matrix],
        rows_info,
        {"T": DType("float32"), "transpose_a": False, "transpose_b": False},
        base="matmul",
    )
    for node, bias in chain:
        if bias is not None:
            value = b.binary("AddV2", value, b.const(bias, "float32", "bias"), rows_info.shape)
        else:
            value = b.op(node.op, [value], rows_info, dict(node.attrs), base=node.op.lower())
    image = b.op(
        "Reshape",
        [value, b.const(np.asarray([-1, 1, 1, kernels], np.int32), "int32", "image_shape")],
        TensorInfo("float32", (batch, 1, 1, kernels)),
        reshape,
        base="image",
    )
    last = chain[-1][0] if chain else conv
    graph.replace_uses(last.output(0), image)
    graph.remove([conv.name, *(node.name for node, _ in chain)])
