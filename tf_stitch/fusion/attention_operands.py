"""Q, K and V as an attention kernel reads them, and its output as it writes it.

An operand is read through the transposes that only it reads (their permutations move the roles
of its dims) and the elementwise ops of its shape that compute it (a bias add, a scale), down to
the tensors the kernel reads, its leaves; the context is written through the transpose that is
its only reader (the head merge).
"""

from __future__ import annotations

from tf_stitch.fusion.attention_checks import FLOATS, Refused, elementwise, legal, only_user
from tf_stitch.fusion.attention_match import Operand, aligned_roles
from tf_stitch.fusion.legality import Context
from tf_stitch.fusion.static_args import transpose_perm
from tf_stitch.graph.ir import TensorRef

# Elementwise ops computing one operand (a bias add and a scale are two).
MAX_OPERAND_OPS = 8


def operand(
    ctx: Context,
    ref: TensorRef,
    roles: tuple[str, ...],
    consumer: str,
    leaves: dict[tuple[TensorRef, tuple[str, ...]], None],
) -> Operand:
    """Q, K or V as the kernel computes it: transposes peeled (their permutation moves the
    roles), then elementwise ops of the operand's shape down to the tensors they read."""
    graph = ctx.graph
    transposes: list[str] = []
    while True:
        node = graph.node(ref.node)
        perm = transpose_perm(graph, node) if node.op == "Transpose" else None
        if perm is None or not _private(ctx, ref, consumer) or not legal(ctx, node):
            break
        moved = [""] * len(perm)
        for k, p in enumerate(perm):
            moved[p] = roles[k]
        roles, consumer, ref = tuple(moved), node.name, node.inputs[0]
        transposes.append(node.name)
    nodes: list[str] = []
    _tree(ctx, ref, roles, consumer, nodes, leaves)
    if len(nodes) > MAX_OPERAND_OPS:
        raise Refused(f"an operand is computed by {len(nodes)} ops (at most {MAX_OPERAND_OPS})")
    return Operand(ref, roles, (*nodes, *reversed(transposes)))


def _tree(
    ctx: Context,
    ref: TensorRef,
    roles: tuple[str, ...],
    consumer: str,
    nodes: list[str],
    leaves: dict[tuple[TensorRef, tuple[str, ...]], None],
) -> None:
    node = ctx.graph.node(ref.node)
    shape = ctx.graph.info(ref).shape
    if not (_private(ctx, ref, consumer) and elementwise(ctx, node)):
        add_leaf(ctx, ref, roles, leaves)
        return
    for r in node.inputs:
        if ctx.graph.info(r).shape == shape:
            _tree(ctx, r, roles, node.name, nodes, leaves)
        else:
            add_leaf(ctx, r, roles, leaves)
    nodes.append(node.name)


def output(
    ctx: Context, context: TensorRef, roles: tuple[str, ...]
) -> tuple[TensorRef, tuple[str, ...]]:
    """The context, or the transpose that is its only reader (written through its
    permutation)."""
    user = only_user(ctx, context)
    perm = transpose_perm(ctx.graph, user) if user is not None and user.op == "Transpose" else None
    if user is None or perm is None or context in ctx.fetched or not legal(ctx, user):
        return context, roles
    return user.output(0), tuple(roles[p] for p in perm)


def add_leaf(
    ctx: Context,
    ref: TensorRef,
    roles: tuple[str, ...],
    leaves: dict[tuple[TensorRef, tuple[str, ...]], None],
) -> None:
    """A tensor the kernel reads, aligned to the end of a value with `roles`."""
    info = ctx.graph.info(ref)
    if info.shape is None or len(info.shape) > len(roles):
        raise Refused(f"{ref} does not broadcast to its operand")
    if info.dtype not in FLOATS | {"bool"}:
        raise Refused(f"{ref} has dtype {info.dtype}")
    leaves[(ref, aligned_roles(info.shape, roles))] = None


def _private(ctx: Context, ref: TensorRef, consumer: str) -> bool:
    """Only `consumer` reads `ref`, and only through data edges (it need not be written)."""
    return (
        ctx.consumers.get(ref) == [consumer]
        and ref not in ctx.fetched
        and ref.node not in ctx.control_consumers
    )
