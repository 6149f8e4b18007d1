"""Lowers an attention group (fusion/attention.py) to the kernel IR.

Every tensor the kernel reads becomes an input param whose strides place it on the domain
(batch axes..., queries, keys, head dim, value dim); Q, K, V and the score epilogue become
scalar expressions of loads of them; one-element constants become literals.
"""

from __future__ import annotations

from tf_stitch.codegen.kernel_ir import (
    PROB,
    SCORE,
    Attention,
    Call,
    Expr,
    Kernel,
    Lit,
    Load,
    Param,
    Var,
)
from tf_stitch.codegen.lower_parts import (
    LoweringError,
    access_of,
    call_attrs,
    domain_sizes,
    symbol_binder,
)
from tf_stitch.codegen.sizes import Sym
from tf_stitch.fusion.attention_match import AttentionMatch, aligned_roles
from tf_stitch.fusion.cost_model import ROW_GUESS, unit_cycles
from tf_stitch.fusion.layout_types import FULL, Placement
from tf_stitch.fusion.op_kinds import op_spec
from tf_stitch.fusion.planner import Group
from tf_stitch.graph.ir import Graph, TensorRef
from tf_stitch.graph.values import scalar_constant

Leaf = tuple[TensorRef, tuple[str, ...]]


def lower_attention(graph: Graph, group: Group, name: str) -> Kernel:
    match = group.attention
    assert match is not None
    return _AttentionLowerer(graph, group, match, name).run()


class _AttentionLowerer:
    def __init__(self, graph: Graph, group: Group, match: AttentionMatch, name: str) -> None:
        self.graph = graph
        self.group = group
        self.match = match
        self.domain = domain_sizes(group)
        self.kernel = Kernel(name, self.domain, group.layout.split, [], [])
        self.loads: dict[Leaf, Expr] = {}
        self.members = set(match.members)

    def run(self) -> Kernel:
        k, m = self.kernel, self.match
        for leaf in m.leaves:
            self._bind(leaf)
        out = self._param(m.output, m.out_roles, f"out{len(k.outputs)}", len(k.outputs))
        k.outputs.append(out)
        for axis, size in enumerate(self.domain):
            if isinstance(size, Sym):
                k.symbols.append((str(size), *symbol_binder(k, axis)))
        scores = self._score_roles()
        post = self._expr(m.weighted, scores, {m.probs: Var(PROB)}) if m.weight_nodes else None
        k.attention = Attention(
            batch=len(m.batch),
            q=self._expr(m.q.root, m.q.roles, {}),
            k=self._expr(m.k.root, m.k.roles, {}),
            v=self._expr(m.v.root, m.v.roles, {}),
            score=self._expr(m.logits, scores, {m.raw: Var(SCORE)}),
            out=out.name,
            post=post,
        )
        k.schedule = str(self.group.schedule)
        k.members = [f"{n.name} ({n.op})" for n in self.group.nodes]
        k.block_rows = self.group.memory.block_rows
        keys, head, value = (ROW_GUESS if d is None else d for d in m.domain[-3:])
        ops = sum(op_spec(self.graph.node(n).op).cost for n in m.score_nodes) + 20
        k.unit_cost = unit_cycles(keys, ops, keys * (head + value), k.block_rows)
        return k

    def _score_roles(self) -> tuple[str, ...]:
        return (*self.match.batch, "i", "j")

    # -- params -------------------------------------------------------------------------------
    def _bind(self, leaf: Leaf) -> None:
        ref, roles = leaf
        value = scalar_constant(self.graph, ref)
        ordered = bool(self.graph.node(ref.node).control_inputs)
        dtype = self.graph.info(ref).dtype
        if value is not None and not roles and not ordered:
            self.loads[leaf] = Lit(value, dtype)
            return
        index = len(self.kernel.inputs)
        param = self._param(ref, roles, f"in{index}", index)
        self.kernel.inputs.append(param)
        self.loads[leaf] = Load(param.name)

    def _param(self, ref: TensorRef, roles: tuple[str, ...], name: str, index: int) -> Param:
        """A tensor on the domain: static sizes where its axis has one (checked by the op)."""
        info = self.graph.info(ref)
        axes = self.match.axes(roles)
        dims = tuple(
            self.match.domain[a] if d is None and a >= 0 else d
            for d, a in zip(info.shape or (), axes, strict=True)
        )
        access = access_of(Placement(FULL, dims, axes), self.domain, self.kernel.split)
        return Param(index, name, ref, info.dtype, dims, axes, access, False)

    # -- expressions ----------------------------------------------------------------------------
    def _expr(self, ref: TensorRef, roles: tuple[str, ...], subs: dict[TensorRef, Expr]) -> Expr:
        """`ref` computed by the group's elementwise ops from its leaves, `subs` standing for
        the values the kernel computes otherwise (the raw scores, the probabilities)."""
        if ref in subs:
            return subs[ref]
        if ref.node not in self.members:
            shape = self.graph.info(ref).shape or ()
            leaf = (ref, aligned_roles(shape, roles))
            if leaf not in self.loads:
                raise LoweringError(f"{ref} is read by the attention but not one of its inputs")
            return self.loads[leaf]
        node = self.graph.node(ref.node)
        if node.op in ("OnesLike", "ZerosLike"):  # the scores' shape, not their values
            return Lit(node.op == "OnesLike", node.outputs[0].dtype)
        if node.op == "Cast" and node.name in self.match.weight_nodes:
            return self._expr(node.inputs[0], roles, subs)  # probabilities stay float32
        args = tuple(self._expr(r, roles, subs) for r in node.inputs)
        return Call(node.op, args, call_attrs(node))
