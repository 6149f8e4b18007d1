"""The two products of an attention, read as labelled axes.

Every dim of a product's operands and result gets a letter: an Einsum's own; a batched
matmul's as if it were one (batch letters, then rows `x`, columns `y`, the contracted `d`).
The scores are a product whose result (perhaps transposed once more: Keras' TensorFlow backend
computes `K Q^T` and transposes it when the layer has dropout) runs over the keys last and the
queries second to last; the context contracts the probabilities' keys with V. Roles name what
each dim is: batch axes `b0`, `b1`, ..., queries `i`, keys `j`, the head dim `d`, the value
dim `e`.
"""

from __future__ import annotations

from tf_stitch.graph.ir import Graph, Node

MATMULS = frozenset({"BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"})

Labels = tuple[str, str, str]  # the first operand's, the second's, the result's
Roles = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]


def is_product(node: Node) -> bool:
    return node.op in MATMULS or (node.op == "Einsum" and len(node.inputs) == 2)


def product_labels(node: Node, graph: Graph) -> Labels | None:
    """The letters of a two-operand product with one contracted axis, else None."""
    if len(node.inputs) < 2:
        return None
    if node.op == "Einsum":
        return _einsum_labels(node)
    if node.op not in MATMULS:
        return None
    ranks = [graph.info(r).rank for r in node.inputs[:2]]
    if ranks[0] is None or ranks[0] != ranks[1] or ranks[0] < 3:
        return None
    if node.op == "BatchMatMulV3" and any(
        getattr(node.attrs.get(t), "name", "float32") != "float32" for t in ("Ta", "Tb", "Tout")
    ):
        return None
    batch = "ABCDEFGH"[: ranks[0] - 2]
    a = batch + ("dx" if node.attrs.get("adj_x", False) else "xd")
    b = batch + ("yd" if node.attrs.get("adj_y", False) else "dy")
    return a, b, batch + "xy"


def _einsum_labels(node: Node) -> Labels | None:
    equation = node.attrs.get("equation", b"")
    text = equation.decode() if isinstance(equation, bytes) else str(equation)
    lhs, arrow, out = text.replace(" ", "").partition("->")
    operands = lhs.split(",")
    if not arrow or len(operands) != 2 or "." in text:
        return None
    a, b = operands
    if any(len(set(x)) != len(x) for x in (a, b, out)) or not set(out) <= set(a) | set(b):
        return None
    if (set(a) ^ set(b)) - set(out):
        return None  # a letter summed out of one operand only
    if len((set(a) & set(b)) - set(out)) != 1:
        return None
    return a, b, out


def scores_roles(labels: Labels) -> Roles | None:
    """Roles of the scores (`labels[2]` their result as the softmax sees it): the keys last, of
    one operand only (K); the queries before them, of the other only (Q); every other letter of
    the result a batch axis of Q (K may broadcast along it)."""
    a, b, out = labels
    contracted = (set(a) & set(b)) - set(out)
    if len(contracted) != 1 or len(out) < 2:
        return None
    keys, queries = out[-1], out[-2]
    if keys in b and keys not in a and queries in a and queries not in b:
        q, k = a, b
    elif keys in a and keys not in b and queries in b and queries not in a:
        q, k = b, a
    else:
        return None
    if not set(out[:-2]) <= set(q) or not set(k) <= set(out[:-2]) | {keys} | contracted:
        return None
    role = {x: f"b{i}" for i, x in enumerate(out[:-2])}
    role |= {queries: "i", keys: "j", contracted.pop(): "d"}
    return tuple(role[x] for x in a), tuple(role[x] for x in b), tuple(role[x] for x in out)


def context_roles(labels: Labels, probs_first: bool, probs: tuple[str, ...]) -> Roles | None:
    """Roles of the context, whose operand `probs_first` (0 or 1) has the roles `probs`: the
    probabilities' keys contracted with V's; V's letter of its own is the value dim."""
    a, b, out = labels
    p_labels, v_labels = (a, b) if probs_first else (b, a)
    if len(p_labels) != len(probs):
        return None
    role = dict(zip(p_labels, probs, strict=True))
    contracted = (set(a) & set(b)) - set(out)
    if len(contracted) != 1 or role.get(contracted.pop()) != "j":
        return None
    own = set(v_labels) - set(p_labels)
    if len(own) != 1 or any(role[x] == "i" for x in v_labels if x in role):
        return None
    role[own.pop()] = "e"
    if any(not role[x].startswith("b") for x in v_labels if x in p_labels and role[x] != "j"):
        return None
    if any(role[x].startswith("b") and x not in out for x in p_labels):
        return None
    out_roles = tuple(role[x] for x in out)
    if sorted(r for r in out_roles if not r.startswith("b")) != ["e", "i"]:
        return None
    v_roles = tuple(role[x] for x in v_labels)
    return (probs, v_roles, out_roles) if probs_first else (v_roles, probs, out_roles)
