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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tf_stitch.fusion.attention_products import (
    context_roles,
    is_product,
    product_labels,
    scores_roles,
)
from tf_stitch.fusion.decision import Decision, allow, forbid
from tf_stitch.fusion.legality import Context, node_legality
from tf_stitch.fusion.op_kinds import HALF_DTYPES, OpKind, op_spec
from tf_stitch.fusion.static_args import reduction_axes, transpose_perm
from tf_stitch.graph.ir import Graph, Node, TensorRef
from tf_stitch.graph.values import scalar_constant

# Elementwise ops computing one operand (a bias add and a scale are two).
MAX_OPERAND_OPS = 8
BROADCAST = ""  # the role of a size-1 dim that broadcasts
# what an attention kernel reads and writes: 16-bit floats are computed in float32
_FLOATS = frozenset({"float32"}) | HALF_DTYPES

Log = Callable[[str, Decision], Decision]


@dataclass(frozen=True)
class Operand:
    """Q, K or V: `root` (with a role per dim) as computed by `nodes` (elementwise ops and the
    transposes after them, in topological order) from the tensors the kernel reads."""

    root: TensorRef
    roles: tuple[str, ...]
    nodes: tuple[str, ...]


@dataclass
class AttentionMatch:
    """One attention: what the kernel computes and reads, and the ops it replaces."""

    scores: str  # the matmul of Q and K
    raw: TensorRef  # the scores as the epilogue reads them (the product, or its transpose)
    context: str  # the matmul of the probabilities and V
    output: TensorRef  # what the kernel writes: the context, or its transpose
    out_roles: tuple[str, ...]
    batch: tuple[str, ...]  # the batch roles, in domain order
    q: Operand
    k: Operand
    v: Operand
    logits: TensorRef  # the softmax's input (the scores after the epilogue)
    score_nodes: tuple[str, ...]  # the epilogue's ops, and those computing its masks
    softmax_nodes: tuple[str, ...]
    probs: TensorRef  # the softmax's result
    # what V is weighted by: the probabilities multiplied by factors or zeroed by a mask
    weighted: TensorRef
    weight_nodes: tuple[str, ...]
    # every tensor the kernel reads -> the role of each of its dims
    leaves: dict[tuple[TensorRef, tuple[str, ...]], None] = field(default_factory=dict)
    domain: tuple[int | None, ...] = ()

    @property
    def members(self) -> list[str]:
        return [
            *self.q.nodes,
            *self.k.nodes,
            *self.v.nodes,
            self.scores,
            *([self.raw.node] if self.raw.node != self.scores else []),
            *self.score_nodes,
            *self.softmax_nodes,
            *self.weight_nodes,
            self.context,
            *([self.output.node] if self.output.node != self.context else []),
        ]

    def axis(self, role: str) -> int:
        """The domain axis of a role (-1 for a broadcast dim)."""
        if role == BROADCAST:
            return -1
        if role in self.batch:
            return self.batch.index(role)
        return len(self.batch) + "ijde".index(role)

    def axes(self, roles: tuple[str, ...]) -> tuple[int, ...]:
        return tuple(self.axis(r) for r in roles)


class _Refused(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def find_attention(ctx: Context, log: Log) -> list[AttentionMatch]:
    """Every attention of the graph that one kernel can compute, each decision logged."""
    matches: list[AttentionMatch] = []
    claimed: set[str] = set()
    for node in ctx.graph.topological_order():
        if not is_product(node) or node.name in claimed:
            continue
        try:
            match = _match(ctx, node)
        except _Refused as e:
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
        raise _Refused("")  # not a product of two matrices with one contracted axis
    _check_node(ctx, scores)
    raw, labels = _scores_view(ctx, scores, labels)
    roles = scores_roles(labels)
    if roles is None:
        raise _Refused("the scores' last axis is not the keys of one operand")
    a_roles, b_roles, s_roles = roles
    batch = tuple(r for r in s_roles if r not in "ij")
    leaves: dict[tuple[TensorRef, tuple[str, ...]], None] = {}
    chain, logits = _score_chain(ctx, raw)
    softmax, probs = _softmax(ctx, logits)
    weight_nodes, weighted = _weights(ctx, probs)
    context = _only_user(ctx, weighted)
    if context is None or not is_product(context):
        raise _Refused("the probabilities are not read by one matmul alone")
    _check_node(ctx, context)
    c_labels = product_labels(context, graph)
    probs_first = context.inputs[0] == weighted
    c_roles = context_roles(c_labels, probs_first, s_roles) if c_labels else None
    if c_roles is None:
        raise _Refused(f"{context.op} {context.name} is not probabilities @ values")
    v_ref = context.inputs[1] if probs_first else context.inputs[0]
    v_roles = c_roles[1] if probs_first else c_roles[0]
    q_first = "i" in a_roles
    q_ref, k_ref = scores.inputs[:2] if q_first else scores.inputs[1::-1]
    q_roles, k_roles = (a_roles, b_roles) if q_first else (b_roles, a_roles)
    q = _operand(ctx, q_ref, q_roles, scores.name, leaves)
    k = _operand(ctx, k_ref, k_roles, scores.name, leaves)
    v = _operand(ctx, v_ref, v_roles, context.name, leaves)
    output, out_roles = _output(ctx, context.output(0), c_roles[2])
    core = {*chain, *weight_nodes}
    side = [r for n in sorted(core) for r in graph.node(n).inputs if r.node not in core]
    side = [r for r in side if r not in (raw, probs)]
    masks = _masks(ctx, side, core | {scores.name, raw.node, *softmax})
    _check_weights(ctx, weight_nodes, probs, masks, {raw.node, *chain, *softmax})
    for ref in side + [r for n in masks for r in graph.node(n).inputs]:
        if ref.node not in core | masks | {scores.name, raw.node}:
            _add_leaf(ctx, ref, s_roles, leaves)
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
        raise _Refused("an op is on two paths of the attention")
    _check_private(ctx, match)
    if len({ctx.liveness[n] for n in match.members}) > 1:
        raise _Refused("its ops are alive under different control flow")
    match.domain = _domain(graph, match)
    _check_acyclic(ctx, match)
    return match


def _scores_view(
    ctx: Context, scores: Node, labels: tuple[str, str, str]
) -> tuple[TensorRef, tuple[str, str, str]]:
    """The scores as the epilogue reads them: the product, or the transpose that is its only
    reader (with the result's letters permuted)."""
    raw = scores.output(0)
    user = _only_user(ctx, raw)
    perm = transpose_perm(ctx.graph, user) if user is not None and user.op == "Transpose" else None
    if user is None or perm is None or not _legal(ctx, user):
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
            if not _elementwise(ctx, user) or not _compatible(user.outputs[0].shape, shape):
                raise _Refused(
                    f"the scores reach the softmax through {user.name} ({user.op}), not only "
                    "through elementwise ops"
                )
            reached.add(user.name)
            stack.append(user.output(0))
    if len(logits) != 1:
        raise _Refused("the scores reach no softmax along the keys, or several")
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
    while (user := _only_user(ctx, value)) is not None and _elementwise(ctx, user):
        if user.outputs[0].shape != shape or user.inputs.count(value) != 1:
            break
        if user.op == "Mul":
            pass
        elif user.op == "Cast" and ctx.graph.info(value).dtype in _FLOATS:
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
        if name in candidates or name in members or not _elementwise(ctx, node):
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
            raise _Refused(f"the probabilities' factor {ref} depends on the scores")
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
        _check_node(ctx, op)
        return [op.name], op.output(0)
    m = next(u for u in users if u.op == "Max")
    sub = next(u for u in users if u.op == "Sub")
    last = (len(graph.info(x).shape or ()) - 1,)
    exp = _only_user(ctx, sub.output(0))
    if (
        reduction_axes(graph, m) != last
        or not m.attrs.get("keep_dims", False)
        or sub.inputs != [x, m.output(0)]
        or ctx.consumers.get(m.output(0)) != [sub.name]
        or exp is None
        or exp.op != "Exp"
    ):
        raise _Refused("the scores' consumers are not a softmax along the keys")
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
        raise _Refused("the scores' consumers are not a softmax along the keys")
    nodes = [m, sub, exp, total, div]
    for node in nodes:
        _check_node(ctx, node)
    return [n.name for n in nodes], div.output(0)


# -- operands and the output -------------------------------------------------------------------
def _operand(
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
        if perm is None or not _private(ctx, ref, consumer) or not _legal(ctx, node):
            break
        moved = [""] * len(perm)
        for k, p in enumerate(perm):
            moved[p] = roles[k]
        roles, consumer, ref = tuple(moved), node.name, node.inputs[0]
        transposes.append(node.name)
    nodes: list[str] = []
    _tree(ctx, ref, roles, consumer, nodes, leaves)
    if len(nodes) > MAX_OPERAND_OPS:
        raise _Refused(f"an operand is computed by {len(nodes)} ops (at most {MAX_OPERAND_OPS})")
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
    if not (_private(ctx, ref, consumer) and _elementwise(ctx, node)):
        _add_leaf(ctx, ref, roles, leaves)
        return
    for r in node.inputs:
        if ctx.graph.info(r).shape == shape:
            _tree(ctx, r, roles, node.name, nodes, leaves)
        else:
            _add_leaf(ctx, r, roles, leaves)
    nodes.append(node.name)


def _output(
    ctx: Context, context: TensorRef, roles: tuple[str, ...]
) -> tuple[TensorRef, tuple[str, ...]]:
    """The context, or the transpose that is its only reader (written through its
    permutation)."""
    user = _only_user(ctx, context)
    perm = transpose_perm(ctx.graph, user) if user is not None and user.op == "Transpose" else None
    if user is None or perm is None or context in ctx.fetched or not _legal(ctx, user):
        return context, roles
    return user.output(0), tuple(roles[p] for p in perm)


def _add_leaf(
    ctx: Context,
    ref: TensorRef,
    roles: tuple[str, ...],
    leaves: dict[tuple[TensorRef, tuple[str, ...]], None],
) -> None:
    """A tensor the kernel reads, aligned to the end of a value with `roles`."""
    info = ctx.graph.info(ref)
    if info.shape is None or len(info.shape) > len(roles):
        raise _Refused(f"{ref} does not broadcast to its operand")
    if info.dtype not in _FLOATS | {"bool"}:
        raise _Refused(f"{ref} has dtype {info.dtype}")
    leaves[(ref, aligned_roles(info.shape, roles))] = None


def aligned_roles(shape: tuple[int | None, ...], roles: tuple[str, ...]) -> tuple[str, ...]:
    """The roles of a tensor of `shape` broadcast against a value with `roles` (numpy style:
    aligned at the end; a size-1 dim broadcasts)."""
    aligned = roles[len(roles) - len(shape) :]
    return tuple(BROADCAST if d == 1 else r for d, r in zip(shape, aligned, strict=True))


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
                raise _Refused(f"{ref} is read outside the attention")


def _only_user(ctx: Context, ref: TensorRef) -> Node | None:
    users = ctx.consumers.get(ref, [])
    if len(users) != 1 or ref in ctx.fetched:
        return None
    return ctx.graph.node(users[0])


def _private(ctx: Context, ref: TensorRef, consumer: str) -> bool:
    """Only `consumer` reads `ref`, and only through data edges (it need not be written)."""
    return (
        ctx.consumers.get(ref) == [consumer]
        and ref not in ctx.fetched
        and ref.node not in ctx.control_consumers
    )


def _elementwise(ctx: Context, node: Node) -> bool:
    return op_spec(node.op).kind is OpKind.ELEMENTWISE and bool(node_legality(ctx, node))


def _legal(ctx: Context, node: Node) -> bool:
    try:
        _check_node(ctx, node)
    except _Refused:
        return False
    return True


def _check_node(ctx: Context, node: Node) -> None:
    """What `node_legality` asks of every stitched op, for the ops it knows no kind of."""
    if node.control_inputs or node.name in ctx.control_consumers:
        raise _Refused(f"{node.name} has control edges")
    if node.device and "CPU" not in node.device.upper():
        raise _Refused(f"{node.name} is placed on {node.device}")
    for i, info in enumerate(node.outputs):
        if node.output(i) in ctx.fed:
            raise _Refused(f"{node.name} is fed")
        if info.dtype not in _FLOATS or info.shape is None:
            raise _Refused(f"{node.name} is not a float of known rank")
    data = node.inputs[:1] if node.op in ("Max", "Sum", "Transpose") else node.inputs[:2]
    for ref in data:
        if ctx.graph.info(ref).dtype not in _FLOATS:
            raise _Refused(f"{node.name} reads {ctx.graph.info(ref).dtype}")


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
            raise _Refused(f"the {role} axis has sizes {sorted(static)}")
        domain.append(static.pop() if static else None)
        if role not in sizes and role not in match.batch:
            raise _Refused(f"no tensor the kernel reads spans the {role} axis")
    if domain[-2] is None or domain[-1] is None:
        raise _Refused("the head dims are of unknown size")
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
            raise _Refused(f"a tensor the kernel reads depends on {name}, which it replaces")
        if name in seen or ctx.order[name] < first:
            continue
        seen.add(name)
        node = ctx.graph.node(name)
        stack.extend(r.node for r in node.inputs)
        stack.extend(node.control_inputs)
