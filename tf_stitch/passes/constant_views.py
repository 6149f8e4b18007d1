"""fold-constant-views: a Reshape/ExpandDims/Squeeze of a constant becomes a constant.

Keras reshapes its LayerNormalization gamma/beta to rank 3 at run time; folding lets the fuser
see plain broadcast constants. A constant read elsewhere is copied only if it is small.
"""

from __future__ import annotations

import numpy as np

from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorValue
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.patterns import OpPattern, find_all

_CONST = OpPattern("Const")
# A view whose data and shape operands are constants.
_VIEWS_OF_CONSTANTS = (
    OpPattern("Reshape|ExpandDims", inputs=(_CONST, _CONST)),
    OpPattern("Squeeze", inputs=(_CONST,)),
)
_MAX_COPIED_ELEMENTS = 1 << 16


@graph_pass("fold-constant-views")
def fold_constant_views(graph: Graph, ctx: PassContext) -> Graph:
    """Replaces views of Const nodes by Const nodes holding the viewed value."""
    out = graph.copy()
    users = out.consumers()
    guard = Guard(out)
    for m in [m for pattern in _VIEWS_OF_CONSTANTS for m in find_all(out, pattern)]:
        node = m.root
        if not guard.rewritable(node) or any(r.node in guard.fed for r in node.inputs):
            continue
        src = constant_value(out, node.inputs[0])
        info = node.outputs[0]
        if src is None or not info.fully_defined() or src.dtype == object:
            continue
        if len(users.get(node.inputs[0], [])) > 1 and src.size > _MAX_COPIED_ELEMENTS:
            continue
        value = np.reshape(src, tuple(int(d or 0) for d in info.shape or ()))
        out.nodes[node.name] = Node(
            node.name,
            "Const",
            attrs={"value": TensorValue(value, info.dtype), "dtype": DType(info.dtype)},
            outputs=[TensorInfo(info.dtype, info.shape)],
            device=node.device,
        )
    return out
