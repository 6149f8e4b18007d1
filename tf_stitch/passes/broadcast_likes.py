"""broadcast-likes: `BroadcastTo(x, Shape(t))` becomes `x * OnesLike(t)`, as does
`Tile(x, Shape(t))` of an `x` of ones of `t`'s rank.

The gradient of a mean or sum over a batch of unknown size broadcasts the incoming gradient
back to the input's shape, `BroadcastTo(g, Shape(x))` (a layer norm's backward has two per
layer). With the target computed at run time the fuser cannot take the BroadcastTo; as a
product with ones shaped like `t` it is an elementwise op whose sizes come from `t`, which
kernels take in (OnesLike never reads `t`'s values; `x * 1` is `x` exactly, NaN and -0
included).

Only where the product has the BroadcastTo's shape: every axis of `x` is 1, of `t`'s size, or
unknown where `t`'s is known and not 1. Both unknown (the batch) is taken too: there the
product differs only where TensorFlow fails (`x` longer than `t`, which is 1); an axis `t` has
as 1 and `x` as longer would do that for sure, so it stays.

A Keras loss averaged over the batch has for gradient `Tile(Reshape(g, [1]), Shape(losses))`:
tiling a value whose every size is 1 by `t`'s sizes is broadcasting it to `t`'s shape.
"""

from __future__ import annotations

from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder
from tf_stitch.passes.decompose_common import replace_with
from tf_stitch.passes.patterns import ANY, OpPattern, find_all

_TO_SHAPE = OpPattern("BroadcastTo|Tile", inputs=(ANY, OpPattern("Shape", name="shape")))


@graph_pass("broadcast-likes")
def broadcast_likes(graph: Graph, ctx: PassContext) -> Graph:
    """Rewrites BroadcastTos to the shape of a float32 tensor as products with its OnesLike."""
    out = graph.copy()
    guard = Guard(out)
    for m in find_all(out, _TO_SHAPE):
        node, shape_of = m.root, m.bound["shape"]
        if node.op == "Tile" and not _ones_of_rank(out, node):
            continue
        if not (guard.rewritable(node) and guard.rewritable(shape_of)):
            continue
        x, t = node.inputs[0], shape_of.inputs[0]
        if _same_broadcast(out, x, t, node.outputs[0]):
            _rewrite(out, node, x, t)
    return out


def _ones_of_rank(graph: Graph, tile: Node) -> bool:
    """Whether a Tile's input has every size 1 and as many axes as its multiples."""
    shape, multiples = graph.info(tile.inputs[0]).shape, graph.info(tile.inputs[1]).shape
    if shape is None or multiples is None or len(multiples) != 1:
        return False
    return multiples[0] == len(shape) and all(d == 1 for d in shape)


def _same_broadcast(graph: Graph, x: TensorRef, t: TensorRef, result: TensorInfo) -> bool:
    xi, ti = graph.info(x), graph.info(t)
    if not (xi.dtype == ti.dtype == result.dtype == "float32"):
        return False
    if xi.shape is None or ti.shape is None or len(xi.shape) > len(ti.shape):
        return False
    for xd, td in zip(reversed(xi.shape), reversed(ti.shape), strict=False):
        if xd == 1 or xd == td:
            continue
        if xd is None and td is not None and td != 1:
            continue  # x is 1 there or TensorFlow fails, as the product would
        return False
    return True


def _rewrite(graph: Graph, node: Node, x: TensorRef, t: TensorRef) -> None:
    like = graph.info(t)
    b = NodeBuilder(graph, node.name + "_like", node.device)

    def build(name: str) -> None:
        ones = b.op("OnesLike", [t], like, {"T": DType("float32")})
        b.binary("Mul", x, ones, node.outputs[0].shape, name=name)

    replace_with(graph, node, build)
