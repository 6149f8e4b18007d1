"""What one attention kernel computes: the match `find_attention` (attention.py) returns.

An `AttentionMatch` names the ops the kernel replaces (the scores' product, the epilogue, the
softmax, the probabilities' weights, the context's product), Q, K and V as `Operand`s, and every
tensor the kernel reads with the role of each of its dims. Roles name the domain's axes (batch
axes `b0`, `b1`, ..., queries `i`, keys `j`, the head dim `d`, the value dim `e`; a size-1 dim
that broadcasts has the role `BROADCAST`). The planner makes a group of the match's members;
codegen/lower_attention.py places each tensor on the domain by its roles.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tf_stitch.graph.ir import TensorRef

BROADCAST = ""  # the role of a size-1 dim that broadcasts


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


def aligned_roles(shape: tuple[int | None, ...], roles: tuple[str, ...]) -> tuple[str, ...]:
    """The roles of a tensor of `shape` broadcast against a value with `roles` (numpy style:
    aligned at the end; a size-1 dim broadcasts)."""
    aligned = roles[len(roles) - len(shape) :]
    return tuple(BROADCAST if d == 1 else r for d, r in zip(shape, aligned, strict=True))
