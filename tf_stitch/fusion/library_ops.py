"""Why each library call's neighbours were or were not stitched with it, for `explain()`.

A library call (a matmul, a convolution, a pooling: what cuBLAS, cuDNN or oneDNN computes) is
either inside a kernel (a small matmul's tile, an attention's products) or stays a call. For the
latter, one record says why, and what became of the ops around it: the kernels that read its
result or write its operands, the bias adds and activations left to TensorFlow because its
remapper fuses them into the call, and the TensorFlow ops on either side.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from tf_stitch.fusion.decision import Decision, Record, RecordKind, allow, forbid
from tf_stitch.fusion.legality import LIBRARY_CALLS, Context, library_of_epilogue
from tf_stitch.graph.ir import Node

# The calls whose bias add TensorFlow fuses into them, and poolings.
LIBRARY_OPS = LIBRARY_CALLS | {"MaxPool", "AvgPool", "MaxPool3D", "AvgPool3D"}
_VIEWS = frozenset({"Reshape", "Identity", "ExpandDims", "Squeeze"})
_MAX_NAMED = 3  # neighbours named per record


class _Group(Protocol):
    """What is read of a planned group (planner.Group, which imports this module)."""

    @property
    def id(self) -> int: ...

    @property
    def names(self) -> list[str]: ...

    @property
    def attention(self) -> object: ...


def library_records(
    ctx: Context, groups: Sequence[_Group], records: Iterable[Record]
) -> list[Record]:
    """One record per library call of the graph."""
    owner = {name: g for g in groups for name in g.names}
    refused = {
        r.subject.split(" ")[1]: r.decision.reason
        for r in records
        if r.subject.startswith("node ") and not r.decision
    }
    out = []
    for node in ctx.graph.topological_order():
        if node.op not in LIBRARY_OPS:
            continue
        subject = f"library {node.name} ({node.op})"
        group = owner.get(node.name)
        if group is not None:
            what = "one of its attention's products" if group.attention else "a matmul tile"
            verdict = allow(f"computed in kernel stitched_{group.id}, as {what}")
            out.append(Record(subject, verdict, RecordKind.LIBRARY))
            continue
        why = refused.get(node.name, "")
        if not why or why.endswith("is opaque to the fuser"):
            why = "a kernel of the library (cuBLAS, cuDNN, oneDNN)"
        why = why.removesuffix(": stays a library call")
        notes = [f"stays a library call: {why}"]
        notes += _neighbours(ctx, "its operands come from", _producers(ctx, node), owner)
        notes += _neighbours(ctx, "its result is read by", _readers(ctx, node), owner, library=node)
        out.append(Record(subject, _decision(notes), RecordKind.LIBRARY))
    return out


def _decision(notes: list[str]) -> Decision:
    return forbid("; ".join(notes))


def _neighbours(
    ctx: Context,
    verb: str,
    nodes: list[Node],
    owner: dict[str, _Group],
    library: Node | None = None,
) -> list[str]:
    kernels: dict[int, None] = {}
    fused: list[str] = []
    plain: list[str] = []
    for n in nodes:
        group = owner.get(n.name)
        if group is not None:
            kernels[group.id] = None
        elif library is not None and _fused_epilogue(ctx, n, library):
            fused.append(f"{n.op} {n.name}")
        else:
            plain.append(f"{n.op} {n.name}")
    notes = []
    if kernels:
        names = ", ".join(f"stitched_{g}" for g in list(kernels)[:_MAX_NAMED])
        kind = "its epilogue stitched with what follows" if library else "stitched"
        notes.append(f"{verb} kernel {names} ({kind})")
    if fused:
        notes.append(
            f"its epilogue {', '.join(fused[:_MAX_NAMED])} is left to TensorFlow, which fuses "
            "it (and an activation after it) into the call: one launch"
        )
    if plain:
        more = f" and {len(plain) - _MAX_NAMED} more" if len(plain) > _MAX_NAMED else ""
        notes.append(f"{verb} TensorFlow ops {', '.join(plain[:_MAX_NAMED])}{more}")
    return notes


def _fused_epilogue(ctx: Context, node: Node, library: Node) -> bool:
    """A bias add (or a batch norm of a convolution, see passes/live_batch_norms.py) of
    `library`'s result that TensorFlow fuses into the call."""
    if node.op == "BiasAdd" or (node.op == "FusedBatchNormV3" and library.op == "Conv2D"):
        return True
    found = library_of_epilogue(ctx.graph, node)
    return found is not None and found.name == library.name


def _producers(ctx: Context, node: Node) -> list[Node]:
    out = []
    for ref in node.inputs[:2]:
        producer = ctx.graph.node(ref.node)
        while producer.op in _VIEWS and producer.inputs:
            producer = ctx.graph.node(producer.inputs[0].node)
        if producer.op not in ("Const", "Placeholder"):
            out.append(producer)
    return out


def _readers(ctx: Context, node: Node) -> list[Node]:
    """Who reads `node`'s result, through views."""
    out: list[Node] = []
    stack = [node.output(0)]
    while stack:
        for name in ctx.consumers.get(stack.pop(), []):
            reader = ctx.graph.node(name)
            if reader.op in _VIEWS:
                stack.append(reader.output(0))
            else:
                out.append(reader)
    return out
