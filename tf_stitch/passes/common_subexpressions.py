"""common-subexpressions: nodes that compute the same values from the same inputs are one node.

Keras builds a layer's ops anew at every call, and models call the same activation of one tensor
from several branches: each of NASNet's separable-convolution blocks starts with its own
`relu(h)`, so one tensor has up to five identical Relus. TensorFlow's Grappler merges them
before its executor runs the graph, but tf_stitch's passes run before Grappler and saw five
values: a stitched kernel wrote `relu(h)` five times (NASNet-Large: 10 MB a copy at 165x165x96),
and the groups reading them were tied together.

Two nodes are the same when their op, device, attributes, data inputs (in any order for
commutative ops) and control inputs are. Stateful ops, ops without inputs other than constants
(a Placeholder is not its twin), control flow, function calls and ops that write their input's
buffer are never merged; nor are fed, fetched or target nodes removed (the first of them stays
and readers of the others read it), nor are values a variable write reads (the write takes the
value's buffer only when it is the value's only reader: a copy on a GPU otherwise). Views
(transposes, slices, reshapes, broadcasts) are left as they are: a kernel reads through them at
no cost, a view read by two groups would tie them together, and Grappler still merges the ones
left to TensorFlow. Nodes are visited producers first, so a chain of duplicates collapses in one
sweep.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from tf_stitch.fusion.bundles import WRITES
from tf_stitch.fusion.legality import is_stateful
from tf_stitch.fusion.op_kinds import OpKind, op_spec
from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import AttrList, FuncRef, Graph, Node, TensorRef, TensorValue
from tf_stitch.passes.base import PassContext, graph_pass

# Ops that must stay apart although their inputs and attributes agree.
_NEVER = frozenset(
    {
        # control flow: frames and branches are identified by the node
        "Enter", "RefEnter", "Exit", "RefExit", "NextIteration", "RefNextIteration",
        "Merge", "RefMerge", "Switch", "RefSwitch", "LoopCond", "ControlTrigger",
        "While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase",
        "PartitionedCall", "StatefulPartitionedCall",
        # uninitialized or written in place
        "Empty", "InplaceUpdate", "InplaceAdd", "InplaceSub", "NoOp",
    }
)  # fmt: skip
_VIEWS = frozenset({OpKind.TRANSPOSE, OpKind.RESHAPE, OpKind.SLICE, OpKind.BROADCAST})
# Ops whose data inputs may be read in any order.
_COMMUTATIVE = frozenset(
    {"Add", "AddV2", "AddN", "Mul", "Maximum", "Minimum", "LogicalAnd", "LogicalOr", "Equal",
     "NotEqual", "BitwiseAnd", "BitwiseOr", "BitwiseXor"}
)  # fmt: skip
# Constants of at most this many elements are compared by value (weights are not hashed).
MAX_CONSTANT_ELEMENTS = 4096


class _Unhashable(Exception):
    pass


@graph_pass("common-subexpressions")
def eliminate_common_subexpressions(graph: Graph, ctx: PassContext) -> Graph:
    """Readers of a node that duplicates an earlier one read the earlier one; duplicates go."""
    out = graph.copy()
    guard = Guard(out)
    keep = guard.fed | guard.named  # (control edges are merged, not kept apart)
    # A variable write takes its value's buffer when it is the value's only reader (a copy
    # otherwise): values written stay apart from their twins.
    written = {n.inputs[1].node for n in out if n.op in WRITES and len(n.inputs) > 1}
    first: dict[Hashable, str] = {}
    same: dict[str, str] = {}  # a duplicate -> the node whose values it repeats
    for node in out.topological_order():
        if same:
            _rename_inputs(node, same)
        key = _key(node)
        if key is None:
            continue
        original = first.setdefault(key, node.name)
        if original == node.name or node.name in keep or {node.name, original} & written:
            continue
        same[node.name] = original
    if not same:
        return out
    for node in out:  # loops' back edges: a reader may come before its producer in the order
        _rename_inputs(node, same)
    out.remove(same)
    return out


def _rename_inputs(node: Node, same: dict[str, str]) -> None:
    if any(r.node in same for r in node.inputs):
        node.inputs = [
            TensorRef(same[r.node], r.index) if r.node in same else r for r in node.inputs
        ]
    if any(c in same for c in node.control_inputs):
        node.control_inputs = list(dict.fromkeys(same.get(c, c) for c in node.control_inputs))


def _key(node: Node) -> Hashable | None:
    """What identifies the node's values, or None if the node must stay itself."""
    if node.op in _NEVER or node.op.startswith("_") or is_stateful(node.op):
        return None
    if op_spec(node.op).kind in _VIEWS:
        return None
    if not node.inputs and node.op != "Const":
        return None
    inputs: tuple[Any, ...] = tuple(node.inputs)
    if node.op in _COMMUTATIVE:
        inputs = tuple(sorted(inputs))
    try:
        attrs = tuple(sorted((k, _frozen(v)) for k, v in node.attrs.items()))
    except _Unhashable:
        return None
    return (node.op, node.device, inputs, tuple(sorted(set(node.control_inputs))), attrs)


def _frozen(value: Any) -> Hashable:
    if isinstance(value, TensorValue):
        array = value.array
        if array.size > MAX_CONSTANT_ELEMENTS or array.dtype == object:
            raise _Unhashable
        return ("tensor", value.dtype, array.shape, array.tobytes())
    if isinstance(value, FuncRef):
        raise _Unhashable  # a function's behaviour is not in its name alone
    if isinstance(value, AttrList):
        return ("list", value.kind, tuple(_frozen(v) for v in value.items))
    try:
        hash(value)
    except TypeError as e:
        raise _Unhashable from e
    return value
