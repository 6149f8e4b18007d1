"""fill-likes: `Fill(Shape(t), c)` becomes `OnesLike(t)` (times c) or `ZerosLike(t)` (cast to the
Fill's dtype where it differs from t's: a bool mask shaped like float scores).

`tf.ones_like(t)` of a tensor with an unknown batch is a Fill of its Shape. A Shape reads its
input only for its size, but as an edge it ties the Fill to the tensor's producer: a kernel that
computes `t` and consumes the Fill would be a cycle through the Shape. OnesLike and ZerosLike
are elementwise ops of `t` that never read its values, so kernels take them in.
"""

from __future__ import annotations

from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder
from tf_stitch.passes.decompose_common import replace_with
from tf_stitch.passes.patterns import ANY, OpPattern, find_all

_DTYPES = ("float32", "bool")
_FILL_OF_SHAPE = OpPattern("Fill", inputs=(OpPattern("Shape", name="shape"), ANY))


@graph_pass("fill-likes")
def fill_likes(graph: Graph, ctx: PassContext) -> Graph:
    """Rewrites Fills of a tensor's shape with a constant scalar as OnesLike/ZerosLike of it."""
    out = graph.copy()
    guard = Guard(out)
    for m in find_all(out, _FILL_OF_SHAPE):
        node, shape_of = m.root, m.bound["shape"]
        if not (guard.rewritable(node) and guard.rewritable(shape_of)):
            continue
        value = constant_value(out, node.inputs[1])
        if value is None or value.ndim != 0:
            continue
        source = shape_of.inputs[0]
        dtype = node.outputs[0].dtype
        if dtype not in _DTYPES or out.info(source).dtype not in _DTYPES:
            continue
        _rewrite(out, node, source, value.item())
    return out


def _rewrite(graph: Graph, node: Node, source: TensorRef, value: float | bool) -> None:
    like = graph.info(source)
    dtype = node.outputs[0].dtype
    b = NodeBuilder(graph, node.name + "_like", node.device)
    op = "OnesLike" if value else "ZerosLike"
    scale = None if value in (0, 1) else value  # (True == 1)

    def build(name: str) -> None:
        last = scale is None and like.dtype == dtype
        t = b.op(op, [source], like, {"T": DType(like.dtype)}, name=name if last else None)
        if like.dtype != dtype:
            attrs = {"SrcT": DType(like.dtype), "DstT": DType(dtype), "Truncate": False}
            last = scale is None
            t = b.op("Cast", [t], TensorInfo(dtype, like.shape), attrs, name=name if last else None)
        if scale is not None:
            c = b.const(scale, dtype, base="value")
            b.binary("Mul", t, c, like.shape, dtype, name=name)

    replace_with(graph, node, build)
