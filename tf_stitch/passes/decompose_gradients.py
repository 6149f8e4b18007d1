"""decompose-gradients: the gradient ops of a training step become the elementwise ops and
reductions they compute, so that they are stitched with their neighbours (issue 21).

    ReluGrad(dy, x)     = dy * float(x > 0)         (as TensorFlow's kernel: NaN * 0 is NaN)
    Relu6Grad(dy, x)    = dy * float(0 < x < 6)
    SigmoidGrad(y, dy)  = dy * (y * (1 - y))
    TanhGrad(y, dy)     = dy * (1 - y * y)
    RsqrtGrad(y, dy)    = dy * (-0.5 * y * y * y)
    SqrtGrad(y, dy)     = dy * 0.5 / y
    BiasAddGrad(dy)     = sum of dy over every axis but the channel's (a column reduction)

Each is float32 with its result the only one read, as the other decompositions require.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tf_stitch.graph.ir import DType, Graph, Node, Shape, TensorInfo, TensorRef
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder
from tf_stitch.passes.decompose_common import channels_first, decompose_each, replace_with

Build = Callable[[NodeBuilder, Node, Shape, str], None]


@graph_pass("decompose-gradients")
def decompose_gradients(graph: Graph, ctx: PassContext) -> Graph:
    """Rewrites float32 ReluGrad, Relu6Grad, SigmoidGrad, TanhGrad, RsqrtGrad, SqrtGrad and
    BiasAddGrad into elementwise ops and a reduction."""
    return decompose_each(
        graph, lambda node: node.op in _BUILDERS and _same_shapes(graph, node), _rewrite
    )


def _same_shapes(graph: Graph, node: Node) -> bool:
    """The elementwise gradients' operands have the result's shape (no broadcasting)."""
    if node.op == "BiasAddGrad":
        return graph.info(node.inputs[0]).shape is not None
    shape = node.outputs[0].shape
    return all(graph.info(r).shape == shape for r in node.inputs[:2])


def _rewrite(graph: Graph, node: Node) -> None:
    shape = node.outputs[0].shape
    b = NodeBuilder(graph, node.name + "_decomposed", node.device)
    replace_with(graph, node, lambda name: _BUILDERS[node.op](b, node, shape, name))


def _scalar(b: NodeBuilder, value: float) -> TensorRef:
    return b.const(np.float32(value), "float32", "c")


def _masked(b: NodeBuilder, dy: TensorRef, mask: TensorRef, shape: Shape, name: str) -> None:
    ones = b.op(
        "Cast",
        [mask],
        TensorInfo("float32", shape),
        {"SrcT": DType("bool"), "DstT": DType("float32"), "Truncate": False},
    )
    b.binary("Mul", dy, ones, shape, name=name)


def _compare(b: NodeBuilder, op: str, x: TensorRef, c: float, shape: Shape) -> TensorRef:
    return b.op(op, [x, _scalar(b, c)], TensorInfo("bool", shape), {"T": DType("float32")})


def _relu(b: NodeBuilder, node: Node, shape: Shape, name: str) -> None:
    dy, x = node.inputs[:2]
    _masked(b, dy, _compare(b, "Greater", x, 0.0, shape), shape, name)


def _relu6(b: NodeBuilder, node: Node, shape: Shape, name: str) -> None:
    dy, x = node.inputs[:2]
    above, below = _compare(b, "Greater", x, 0.0, shape), _compare(b, "Less", x, 6.0, shape)
    inside = b.op("LogicalAnd", [above, below], TensorInfo("bool", shape))
    _masked(b, dy, inside, shape, name)


def _sigmoid(b: NodeBuilder, node: Node, shape: Shape, name: str) -> None:
    y, dy = node.inputs[:2]
    slope = b.binary("Mul", y, b.binary("Sub", _scalar(b, 1.0), y, shape), shape)
    b.binary("Mul", dy, slope, shape, name=name)


def _tanh(b: NodeBuilder, node: Node, shape: Shape, name: str) -> None:
    y, dy = node.inputs[:2]
    slope = b.binary("Sub", _scalar(b, 1.0), b.binary("Mul", y, y, shape), shape)
    b.binary("Mul", dy, slope, shape, name=name)


def _rsqrt(b: NodeBuilder, node: Node, shape: Shape, name: str) -> None:
    y, dy = node.inputs[:2]
    cube = b.binary("Mul", b.binary("Mul", y, y, shape), y, shape)
    b.binary("Mul", dy, b.binary("Mul", _scalar(b, -0.5), cube, shape), shape, name=name)


def _sqrt(b: NodeBuilder, node: Node, shape: Shape, name: str) -> None:
    y, dy = node.inputs[:2]
    b.binary("Mul", dy, b.binary("RealDiv", _scalar(b, 0.5), y, shape), shape, name=name)


def _bias_add_grad(b: NodeBuilder, node: Node, shape: Shape, name: str) -> None:
    (dy,) = node.inputs[:1]
    rank = len(b.graph.info(dy).shape or ())
    channel = 1 if channels_first(node) else rank - 1
    axes = np.asarray([a for a in range(rank) if a != channel], np.int32)
    attrs = {"T": DType("float32"), "Tidx": DType("int32"), "keep_dims": False}
    b.op(
        "Sum", [dy, b.const(axes, "int32", "axes")], TensorInfo("float32", shape), attrs, name=name
    )


_BUILDERS: dict[str, Build] = {
    "ReluGrad": _relu,
    "Relu6Grad": _relu6,
    "SigmoidGrad": _sigmoid,
    "TanhGrad": _tanh,
    "RsqrtGrad": _rsqrt,
    "SqrtGrad": _sqrt,
    "BiasAddGrad": _bias_add_grad,
}
