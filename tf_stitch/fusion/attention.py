"""Attention as one kernel: scores = Q K^T, an elementwise epilogue, softmax, context = P V.

The pattern, after decompose-softmax: a batched matmul (or a two-operand Einsum) of Q and K
whose result (perhaps transposed once: Keras computes K Q^T on its dropout path) runs over the
keys last (`attention_products.py`); elementwise ops from it to the softmax's input (a scale,
a position bias, a mask, as a graph of ops: every other operand a tensor the kernel reads, or
computed by ops nothing else reads, which then join it); the softmax (max, subtract, exp, sum,
divide along the keys, or a Softmax op); the probabilities multiplied by factors or zeroed by
a mask (Keras' masked softmax); a batched matmul (or Einsum) of them with V. Q, K and V may
each be computed by elementwise ops (a bias add, a scale) and transposed on the way (the head
split of Keras and T5); the context may be transposed once more (the head merge). The kernel
reads and writes through those permutations, so the transposes, the scores and the
probabilities never reach memory: XLA:GPU and cuDNN's fused attention do the same.

Every tensor the kernel touches is placed on one domain, (batch axes..., queries, keys, head
dim, value dim): each of its dims is on one axis, or broadcasts (a size-1 dim). The batch axes
are the scores' leading axes in their order; the head dims must be of known size.

What a match holds is in attention_match.py; how Q, K, V and the output are read and written,
in attention_operands.py; the checks every op of the kernel passes, in attention_checks.py.
"""

from __future__ import annotations

from collections.abc import Callable

from tf_stitch.fusion import attention_operands
from tf_stitch.fusion.attention_checks import (
    FLOATS,
    Refused,
    check_node,
    elementwise,
    legal,
    only_user,
)
from tf_stitch.fusion.attention_match import BROADCAST, AttentionMatch
from tf_stitch.fusion.attention_products import (
    context_roles,
    is_product,
    product_labels,
    scores_roles,
)
from tf_stitch.fusion.decision import Decision, allow, forbid
from tf_stitch.fusion.legality import Context
from tf_stitch.fusion.static_args import reduction_axes, transpose_perm
from tf_stitch.graph.ir import Graph, Node, TensorRef
from tf_stitch.graph.values import scalar_constant

Log = Callable[[str, Decision], Decision]


def find_attention(ctx: Context, log: Log) -> list[AttentionMatch]:
    """Every attention of the graph that one kernel can compute, each decision logged."""
    matches: list[AttentionMatch] = []
    claimed: set[str] = set()
    for node in ctx.graph.topological_order():
        if not is_product(node) or node.name in claimed:
            continue
        try:
            match = _match(ctx, node)
        except Refused as e:
            if e.reason and _reaches_softmax(ctx, node.output(0)):
                log(f"attention at {node.name}", forbid(e.reason))
            continue
        if claimed & set(match.members):
            continue
        claimed |= set(match.members)
        matches.append(match)
        shape = "x".join("?" if d is None else str(d) for d in match.domain)
        log(
            f"attention at {node.name}",
            allow(
                f"scores, softmax and context in one kernel over {shape} (batch..., queries, "
                f"keys, head, value): {len(match.members)} ops, no transpose or score tensor "
                "in memory"
            ),
        )
    return matches


def _reaches_softmax(ctx: Context, ref: TensorRef, hops: int = 4) -> bool:
    """Whether a softmax reads `ref` within a few ops (else a refusal is not worth a line:
    the product is no attention's scores)."""
    frontier = [ref]
    for _ in range(hops):
        nodes = [u for r in frontier for u in _users(ctx, r)]
        if any(n.op in ("Softmax", "Max", "Exp") for n in nodes):
            return True
        frontier = [n.output(0) for n in nodes if n.outputs]
    return False


def _match(ctx: Context, scores: Node) -> AttentionMatch:
    graph = ctx.graph
    labels = product_labels(scores, graph)
    if labels is None:
        raise Refused("")  # not a product of two matrices with one contracted axis
    check_node(ctx, scores)
    raw, labels = _scores_view(ctx, scores, labels)
    roles = scores_roles(labels)
    if roles is None:
        raise Refused("the scores' last axis is not the keys of one operand")
    a_roles, b_roles, s_roles = roles
    batch = tuple(r for r in s_roles if r not in "ij")
    leaves: dict[tuple[TensorRef, tuple[str, ...]], None] = {}
    chain, logits = _score_chain(ctx, raw)
    softmax, probs = _softmax(ctx, logits)
    weight_nodes, weighted = _weights(ctx, probs)
    context = only_user(ctx, weighted)
    if context is None or not is_product(context):
        raise Refused("the probabilities are not read by one matmul alone")
    check_node(ctx, context)
    c_labels = product_labels(context, graph)
    probs_first = context.inputs[0] == weighted
    c_roles = context_roles(c_labels, probs_first, s_roles) if c_labels else None
    if c_roles is None:
        raise Refused(f"{context.op} {context.name} is not probabilities @ values")
    v_ref = context.inputs[1] if probs_first else context.inputs[0]
    v_roles = c_roles[1] if probs_first else c_roles[0]
    q_first = "i" in a_roles
    q_ref, k_ref = scores.inputs[:2] if q_first else scores.inputs[1::-1]
    q_roles, k_roles = (a_roles, b_roles) if q_first else (b_roles, a_roles)
    q = attention_operands.operand(ctx, q_ref, q_roles, scores.name, leaves)
    k = attention_operands.operand(ctx, k_ref, k_roles, scores.name, leaves)
    v = attention_operands.operand(ctx, v_ref, v_roles, context.name, leaves)
    output, out_roles = attention_operands.output(ctx, context.output(0), c_roles[2])
    core = {*chain, *weight_nodes}
    side = [r for n in sorted(core) for r in graph.node(n).inputs if r.node not in core]
    side = [r for r in side if r not in (raw, probs)]
    masks = _masks(ctx, side, core | {scores.name, raw.node, *softmax})
    _check_weights(ctx, weight_nodes, probs, masks, {raw.node, *chain, *softmax})
    for ref in side + [r for n in masks for r in graph.node(n).inputs]:
        if ref.node not in core | masks | {scores.name, raw.node}:
            attention_operands.add_leaf(ctx, ref, s_roles, leaves)
    order = ctx.order.__getitem__
    match = AttentionMatch(
        scores.name,
        raw,
        context.name,
        output,
        out_roles,
        batch,
        q,
        k,
        v,
        logits,
        tuple(sorted({*chain, *masks}, key=order)),
        tuple(softmax),
        probs,
        weighted,
        tuple(weight_nodes),
        leaves,
    )
    if len(set(match.members)) != len(match.members):
        raise Refused("an op is on two paths of the attention")
    _check_private(ctx, match)
    if len({ctx.liveness[n] for n in match.members}) > 1:
        raise Refused("its ops are alive under different control flow")
    match.domain = _domain(graph, match)
    _check_acyclic(ctx, match)
    return match


def _scores_view(
    ctx: Context, scores: Node, labels: tuple[str, str, str]
) -> tuple[TensorRef, tuple[str, str, str]]:
    """The scores as the epilogue reads them: the product, or the transpose that is its only
    reader (with the result's letters permuted)."""
    raw = scores.output(0)
    user = only_user(ctx, raw)
    perm = transpose_perm(ctx.graph, user) if user is not None and user.op == "Transpose" else None
    if user is None or perm is None or not legal(ctx, user):
        return raw, labels
    a, b, out = labels
    return user.output(0), (a, b, "".join(out[p] for p in perm))


# -- from the scores to the probabilities ------------------------------------------------------
def _score_chain(ctx: Context, scores: TensorRef) -> tuple[list[str], TensorRef]:
    """The elementwise ops from the scores to the softmax's input (a graph of them: Keras'
    `where(mask, s - 1e9, s)` reads the scores twice), in topological order. The scores may
    also be read by OnesLike/ZerosLike (Keras builds its masks' shape from them): they read no
    value, and join the kernel with the mask (`_masks`)."""
    shape = ctx.graph.info(scores).shape
    reached: set[str] = set()
    logits: set[TensorRef] = set()
    stack = [scores]
    while stack:
        value = stack.pop()
        if _softmax_starts(ctx, value):
            logits.add(value)
            continue
        for user in _users(ctx, value):
            if user.op in _SHAPE_ONLY or user.name in reached:
                continue
            if not elementwise(ctx, user) or not _compatible(user.outputs[0].shape, shape):
                raise Refused(
                    f"the scores reach the softmax through {user.name} ({user.op}), not only "
                    "through elementwise ops"
                )
            reached.add(user.name)
            stack.append(user.output(0))
    if len(logits) != 1:
        raise Refused("the scores reach no softmax along the keys, or several")
    return sorted(reached, key=ctx.order.__getitem__), logits.pop()


def _compatible(a: tuple[int | None, ...] | None, b: tuple[int | None, ...] | None) -> bool:
    """Shapes of one rank whose sizes agree where both are known (a position bias may make a
    size known that was not)."""
    if a is None or b is None or len(a) != len(b):
        return False
    return all(x is None or y is None or x == y for x, y in zip(a, b, strict=True))


def _weights(ctx: Context, probs: TensorRef) -> tuple[list[str], TensorRef]:
    """What the probabilities go through before V: multiplications by factors that do not
    depend on them, and selections of them or 0 (Keras' masked softmax zeroes the masked
    ones), each of which a kernel may apply to the softmax's exponentials before dividing by
    their sum, and casts between float types (mixed precision's probabilities cast to 16 bits,
    which the kernel keeps in float32). Their ops, and the result."""
    nodes: list[str] = []
    value = probs
    shape = ctx.graph.info(probs).shape
    while (user := only_user(ctx, value)) is not None and elementwise(ctx, user):
        if user.outputs[0].shape != shape or user.inputs.count(value) != 1:
            break
        if user.op == "Mul":
            pass
        elif user.op == "Cast" and ctx.graph.info(value).dtype in FLOATS:
            pass  # computed in float32 (the kernel rounds its output alone)
        elif user.op in ("Select", "SelectV2") and value != user.inputs[0]:
            other = user.inputs[2] if user.inputs[1] == value else user.inputs[1]
            if scalar_constant(ctx.graph, other) != 0:
                break
        else:
            break
        nodes.append(user.name)
        value = user.output(0)
    return nodes, value


def _masks(ctx: Context, side: list[TensorRef], members: set[str]) -> set[str]:
    """The elementwise ops computing the epilogue's other operands (a mask from the scores'
    shape and a causal band, as Keras builds it) that nothing outside the kernel reads: they
    join the kernel, their inputs are read by it."""
    candidates: set[str] = set()
    stack = [r.node for r in side]
    while stack:
        name = stack.pop()
        node = ctx.graph.node(name)
        if name in candidates or name in members or not elementwise(ctx, node):
            continue
        candidates.add(name)
        if node.op not in _SHAPE_ONLY:
            stack.extend(r.node for r in node.inputs)
    taken: set[str] = set()
    changed = True
    while changed:  # a candidate joins once every reader of it has
        changed = False
        for name in sorted(candidates - taken):
            users = ctx.consumers.get(ctx.graph.node(name).output(0), [])
            fetched = ctx.graph.node(name).output(0) in ctx.fetched
            if not fetched and users and all(u in members | taken for u in users):
                taken.add(name)
                changed = True
    return taken


def _check_weights(
    ctx: Context, weights: list[str], probs: TensorRef, masks: set[str], before: set[str]
) -> None:
    """What the probabilities are multiplied by or selected with must not read the scores or
    the probabilities: a kernel applies it to each exponential before the sum divides it
    (a GPU's online softmax never has the probabilities themselves)."""
    stack = [
        r for n in weights for r in ctx.graph.node(n).inputs if r.node not in weights and r != probs
    ]
    seen: set[str] = set()
    while stack:
        ref = stack.pop()
        if ref.node in before:
            raise Refused(f"the probabilities' factor {ref} depends on the scores")
        node = ctx.graph.node(ref.node)
        if ref.node in masks and ref.node not in seen and node.op not in _SHAPE_ONLY:
            seen.add(ref.node)
            stack.extend(node.inputs)


def _softmax_starts(ctx: Context, x: TensorRef) -> bool:
    users = ctx.consumers.get(x, [])
    if len(users) == 1:
        return ctx.graph.node(users[0]).op == "Softmax"
    return len(users) == 2 and {ctx.graph.node(u).op for u in users} == {"Max", "Sub"}


def _softmax(ctx: Context, x: TensorRef) -> tuple[list[str], TensorRef]:
    """The softmax of `x` along its last axis: its ops and the probabilities."""
    graph = ctx.graph
    users = [graph.node(u) for u in ctx.consumers.get(x, [])]
    if len(users) == 1:  # a Softmax op decompose-softmax left alone
        (op,) = users
        check_node(ctx, op)
        return [op.name], op.output(0)
    m = next(u for u in users if u.op == "Max")
    sub = next(u for u in users if u.op == "Sub")
    last = (len(graph.info(x).shape or ()) - 1,)
    exp = only_user(ctx, sub.output(0))
    if (
        reduction_axes(graph, m) != last
        or not m.attrs.get("keep_dims", False)
        or sub.inputs != [x, m.output(0)]
        or ctx.consumers.get(m.output(0)) != [sub.name]
        or exp is None
        or exp.op != "Exp"
    ):
        raise Refused("the scores' consumers are not a softmax along the keys")
    users = [graph.node(u) for u in ctx.consumers.get(exp.output(0), [])]
    total = next((u for u in users if u.op == "Sum"), None)
    div = next((u for u in users if u.op == "RealDiv"), None)
    if (
        len(users) != 2
        or total is None
        or div is None
        or reduction_axes(graph, total) != last
        or not total.attrs.get("keep_dims", False)
        or div.inputs != [exp.output(0), total.output(0)]
        or ctx.consumers.get(total.output(0)) != [div.name]
    ):
        raise Refused("the scores' consumers are not a softmax along the keys")
    nodes = [m, sub, exp, total, div]
    for node in nodes:
        check_node(ctx, node)
    return [n.name for n in nodes], div.output(0)


# -- checks ------------------------------------------------------------------------------------
_SHAPE_ONLY = frozenset({"OnesLike", "ZerosLike"})  # read their input's shape, not its values


def _users(ctx: Context, ref: TensorRef) -> list[Node]:
    return [ctx.graph.node(u) for u in ctx.consumers.get(ref, [])]


def _check_private(ctx: Context, match: AttentionMatch) -> None:
    """Nothing outside the kernel reads what its ops compute, but its output."""
    members = set(match.members)
    for name in members:
        node = ctx.graph.node(name)
        for i in range(len(node.outputs)):
            ref = node.output(i)
            if ref == match.output:
                continue
            if ref in ctx.fetched or any(u not in members for u in ctx.consumers.get(ref, [])):
                raise Refused(f"{ref} is read outside the attention")


def _domain(graph: Graph, match: AttentionMatch) -> tuple[int | None, ...]:
    """The size of every axis: the static one where any tensor on it has one."""
    sizes: dict[str, set[int | None]] = {}
    placed = [(ref, roles) for ref, roles in match.leaves]
    placed += [(match.output, match.out_roles)]
    for ref, roles in placed:
        for d, role in zip(graph.info(ref).shape or (), roles, strict=True):
            if role != BROADCAST:
                sizes.setdefault(role, set()).add(d)
    domain: list[int | None] = []
    for role in [*match.batch, "i", "j", "d", "e"]:
        static = {s for s in sizes.get(role, set()) if s is not None}
        if len(static) > 1:
            raise Refused(f"the {role} axis has sizes {sorted(static)}")
        domain.append(static.pop() if static else None)
        if role not in sizes and role not in match.batch:
            raise Refused(f"no tensor the kernel reads spans the {role} axis")
    if domain[-2] is None or domain[-1] is None:
        raise Refused("the head dims are of unknown size")
    return tuple(domain)


def _check_acyclic(ctx: Context, match: AttentionMatch) -> None:
    """No tensor the kernel reads may depend on an op it replaces."""
    members = set(match.members)
    first = min(ctx.order[n] for n in members)
    seen: set[str] = set()
    stack = [ref.node for ref, _ in match.leaves]
    while stack:
        name = stack.pop()
        if name in members:
            raise Refused(f"a tensor the kernel reads depends on {name}, which it replaces")
        if name in seen or ctx.order[name] < first:
            continue
        seen.add(name)
        node = ctx.graph.node(name)
        stack.extend(r.node for r in node.inputs)
        stack.extend(node.control_inputs)
