"""decompose-batch-norm: inference FusedBatchNorm becomes y = x * s + t, per channel.

With s = scale * rsqrt(variance + epsilon) and t = offset - mean * s, as TensorFlow's CPU
kernel computes it. s and t are per-channel; fold-constants turns them into constants when the
statistics are constants (a frozen model), so the stitched kernel does one multiply-add.
"""

from __future__ import annotations

import numpy as np

from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder
from tf_stitch.passes.decompose_common import channels_first, decompose_each, replace_with

_OPS = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")


@graph_pass("decompose-batch-norm")
def decompose_batch_norm(graph: Graph, ctx: PassContext) -> Graph:
    """Rewrites inference FusedBatchNorm* (float32 statistics) whose statistics outputs are
    unused; a 16-bit one is computed in float32 between casts, as TensorFlow's kernel does."""
    return decompose_each(graph, _accepts, _rewrite, ("float32", "float16", "bfloat16"))


def _accepts(node: Node) -> bool:
    return node.op in _OPS and _inference(node)


def _inference(node: Node) -> bool:
    params = node.attrs.get("U", node.attrs.get("T"))
    return (
        not node.attrs.get("is_training", True)
        and getattr(params, "name", None) == "float32"
        and node.outputs[0].rank in (4, 5)
    )


def _rewrite(graph: Graph, node: Node) -> None:
    shape = node.outputs[0].shape
    assert shape is not None
    first = channels_first(node)
    eps = float(node.attrs.get("epsilon", 1e-4))
    x, scale, offset, mean, variance = node.inputs[:5]
    c = graph.info(scale).shape
    vec = (c[0] if c else None,)
    b = NodeBuilder(graph, node.name + "_decomposed", node.device)

    def channel(ref: TensorRef) -> TensorRef:
        if not first:
            return ref
        target = np.asarray([-1] + [1] * (len(shape) - 2), dtype=np.int32)
        return b.op(
            "Reshape",
            [ref, b.const(target, "int32", base="channel_shape")],
            TensorInfo("float32", vec + (1,) * (len(shape) - 2)),
            {"T": DType("float32"), "Tshape": DType("int32")},
        )

    dtype = node.outputs[0].dtype

    def cast(ref: TensorRef, to: str, name: str | None = None) -> TensorRef:
        attrs = {"SrcT": DType(graph.info(ref).dtype), "DstT": DType(to), "Truncate": False}
        return b.op("Cast", [ref], TensorInfo(to, shape), attrs, name=name)

    def build(name: str) -> None:
        inv = b.unary(
            "Rsqrt", b.binary("AddV2", variance, b.const(eps, "float32", "epsilon"), vec), vec
        )
        s = b.binary("Mul", inv, scale, vec)
        t = b.binary("Sub", offset, b.binary("Mul", mean, s, vec), vec)
        wide = x if dtype == "float32" else cast(x, "float32")
        last = name if dtype == "float32" else None
        y = b.binary(
            "AddV2", b.binary("Mul", wide, channel(s), shape), channel(t), shape, name=last
        )
        if dtype != "float32":
            cast(y, dtype, name)

    replace_with(graph, node, build)
