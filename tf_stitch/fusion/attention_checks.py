"""What attention.py and attention_operands.py ask of each op they take into a kernel.

`check_node` refuses an op with control edges, placed off the CPU, fed, or not computing floats
(`FLOATS`: 16-bit floats are computed in float32); `legal` says whether it would; `elementwise`
is an elementwise op the stitcher's node legality allows; `only_user` is a value's one reader.
A refusal raises `Refused` with its reason, which `find_attention` logs.
"""

from __future__ import annotations

from tf_stitch.fusion.legality import Context, node_legality
from tf_stitch.fusion.op_kinds import HALF_DTYPES, OpKind, op_spec
from tf_stitch.graph.ir import Node, TensorRef

# what an attention kernel reads and writes: 16-bit floats are computed in float32
FLOATS = frozenset({"float32"}) | HALF_DTYPES


class Refused(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def only_user(ctx: Context, ref: TensorRef) -> Node | None:
    users = ctx.consumers.get(ref, [])
    if len(users) != 1 or ref in ctx.fetched:
        return None
    return ctx.graph.node(users[0])


def elementwise(ctx: Context, node: Node) -> bool:
    return op_spec(node.op).kind is OpKind.ELEMENTWISE and bool(node_legality(ctx, node))


def legal(ctx: Context, node: Node) -> bool:
    try:
        check_node(ctx, node)
    except Refused:
        return False
    return True


def check_node(ctx: Context, node: Node) -> None:
    """What `node_legality` asks of every stitched op, for the ops it knows no kind of."""
    if node.control_inputs or node.name in ctx.control_consumers:
        raise Refused(f"{node.name} has control edges")
    if node.device and "CPU" not in node.device.upper():
        raise Refused(f"{node.name} is placed on {node.device}")
    for i, info in enumerate(node.outputs):
        if node.output(i) in ctx.fed:
            raise Refused(f"{node.name} is fed")
        if info.dtype not in FLOATS or info.shape is None:
            raise Refused(f"{node.name} is not a float of known rank")
    data = node.inputs[:1] if node.op in ("Max", "Sum", "Transpose") else node.inputs[:2]
    for ref in data:
        if ctx.graph.info(ref).dtype not in FLOATS:
            raise Refused(f"{node.name} reads {ctx.graph.info(ref).dtype}")
