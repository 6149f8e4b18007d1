"""decompose-bias-add: BiasAdd becomes AddV2 (with the bias reshaped for channels-first), in
the node's dtype (float32, float16, bfloat16 or float64)."""

from __future__ import annotations

import numpy as np

from tf_stitch.fusion.op_kinds import FLOAT_DTYPES
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder
from tf_stitch.passes.decompose_common import (
    channels_first,
    decompose_each,
    replace_with,
)


@graph_pass("decompose-bias-add")
def decompose_bias_add(graph: Graph, ctx: PassContext) -> Graph:
    """Rewrites BiasAdd/BiasAddV1 into a broadcasting AddV2."""
    bias_adds = ("BiasAdd", "BiasAddV1")
    return decompose_each(graph, lambda node: node.op in bias_adds, _rewrite, FLOAT_DTYPES)


def _rewrite(graph: Graph, node: Node) -> None:
    shape = node.outputs[0].shape
    assert shape is not None
    first = channels_first(node)
    b = NodeBuilder(graph, node.name + "_decomposed", node.device)
    value, bias = node.inputs
    t = node.outputs[0].dtype

    def build(name: str) -> None:
        bias_ref = bias
        if first and len(shape) > 2:
            c = graph.info(bias).shape
            target = np.asarray([-1] + [1] * (len(shape) - 2), dtype=np.int32)
            bias_ref = b.op(
                "Reshape",
                [bias, b.const(target, "int32", base="bias_shape")],
                TensorInfo(t, (c[0] if c else None,) + (1,) * (len(shape) - 2)),
                {"T": DType(t), "Tshape": DType("int32")},
            )
        b.binary("AddV2", value, bias_ref, shape, dtype=t, name=name)

    replace_with(graph, node, build)
