"""forward-writes: a variable's update is computed as a value, and the reads after it use that
value.

A training step updates each variable with TensorFlow's read-modify-write ops, and reads it
again after the update (Keras' Adam: `m.assign_add((g - m) * (1 - beta_1))`, then
`w.assign_sub(lr * m / (sqrt(v) + eps))` reads `m` back):

    m0 = ReadVariableOp(m);  AssignAddVariableOp(m, d);  m1 = ReadVariableOp(m)   (after it)

so the moments are one kernel, the weight update another, and every AssignAdd/AssignSub is an
add kernel of TensorFlow's on a GPU. Here the update becomes

    m1 = m0 + d;  AssignVariableOp(m, m1)     and the reads after it use m1,

so one kernel computes a variable's moments and its new value from the values read at the
start, and each AssignVariableOp adopts the kernel's output buffer when it is its only reader
(TensorFlow's AssignVariableOp takes over a value tensor nobody else holds instead of copying
it: no kernel on a GPU).

Order is TensorFlow's: automatic control dependencies chain the ops on one resource (a read
waits for the last write; a write waits for the reads since the last write, or for the last
write). The pass follows each handle's ops in that order and rewrites only while the chain is
intact: a read must run after the last write before it, a write after the reads since the last
one (or after that write), by a path of data or control edges. Any other op on the handle (a
gather, a scatter, a loop or a call it is passed to) ends forwarding for that handle, as does a
write whose value before it is not known (no read of it came first). Reads with no write
between them are one value (the first read's), so that Grappler's common-subexpression
elimination can merge what is computed from them (Keras' Adam casts `iterations + 1` once per
variable).
"""

from __future__ import annotations

from tf_stitch.graph.ir import DType, Graph, Node, TensorRef
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder

_UPDATES = {"AssignAddVariableOp": "AddV2", "AssignSubVariableOp": "Sub"}
_WRITES = frozenset({"AssignVariableOp", *_UPDATES})


@graph_pass("forward-writes")
def forward_writes(graph: Graph, ctx: PassContext) -> Graph:
    """Read-modify-write variable updates -> a computed value assigned, read back by its readers."""
    users: dict[TensorRef, list[Node]] = {}
    ordered = graph.topological_order()
    for node in ordered:
        for ref in node.inputs:
            if graph.info(ref).dtype == "resource" and graph.node(ref.node).op == "Placeholder":
                users.setdefault(ref, []).append(node)
    chains = {h: ops for h, ops in users.items() if len(ops) > 1}
    if not chains:
        return graph
    out = graph.copy()
    order = {n.name: i for i, n in enumerate(ordered)}  # the copy's nodes have the same names
    for handle, ops in chains.items():
        _forward(out, order, handle, [out.node(n.name) for n in ops])
    return out


def _deps(node: Node) -> list[str]:
    return [r.node for r in node.inputs] + node.control_inputs


def _after(graph: Graph, order: dict[str, int], node: Node, earlier: Node) -> bool:
    """Whether `node` runs after `earlier`: a path of data or control edges leads from it (only
    nodes between the two in topological order can be on one)."""
    low = order[earlier.name]
    stack, seen = _deps(node), set()
    while stack:
        name = stack.pop()
        if name == earlier.name:
            return True
        if name in seen or order[name] < low:
            continue
        seen.add(name)
        stack.extend(_deps(graph.node(name)))
    return False


def _forward(graph: Graph, order: dict[str, int], handle: TensorRef, ops: list[Node]) -> None:
    """Rewrites the updates of one variable, `ops` being every op on its handle in order."""
    value: TensorRef | None = None  # the variable's value at this point of the chain
    last_write: Node | None = None
    reads: list[Node] = []  # since the last write
    for node in ops:
        if node.op == "ReadVariableOp" and node.inputs == [handle]:
            if last_write is not None and not _after(graph, order, node, last_write):
                return  # not ordered after the write: it may see either value
            if value is None:
                value = node.output(0)
            elif value != node.output(0):
                graph.replace_uses(node.output(0), value)
            reads.append(node)
            continue
        if node.op not in _WRITES or node.inputs[0] != handle or len(node.inputs) != 2:
            return  # another kind of op on the variable: forward no further
        waits_for = reads or ([last_write] if last_write is not None else [])
        if not all(_after(graph, order, node, n) for n in waits_for):
            return
        if node.op in _UPDATES:
            if value is None:
                return  # the value before the update is not known here
            value = _update(graph, node, value)
        else:
            value = node.inputs[1]
        last_write, reads = node, []


def _update(graph: Graph, node: Node, before: TensorRef) -> TensorRef:
    """`node` (AssignAdd/AssignSub) becomes an AssignVariableOp of `before` +/- its delta."""
    delta = node.inputs[1]
    dtype = graph.info(before).dtype
    b = NodeBuilder(graph, node.name, node.device)
    after = b.binary(_UPDATES[node.op], before, delta, graph.info(before).shape, dtype)
    node.op = "AssignVariableOp"
    node.inputs = [node.inputs[0], after]
    node.attrs = {"dtype": DType(dtype), "validate_shape": False}
    return after
