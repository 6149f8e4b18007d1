"""What the passes that rewrite some terms of an AddN share (slice-grads, sum-of-products): the
terms only the sum reads, and putting one value in place of several of them."""

from __future__ import annotations

from tf_stitch.graph.ir import Graph, Node, TensorRef


def sole_terms(add: Node, readers: dict[TensorRef, list[str]]) -> list[TensorRef]:
    """The terms of `add` (an AddN) it sums once and nothing else reads, in order."""
    return [
        ref
        for ref in dict.fromkeys(add.inputs)
        if add.inputs.count(ref) == 1 and readers.get(ref, []) == [add.name]
    ]


def replace_terms(graph: Graph, add: Node, terms: list[TensorRef], by: TensorRef) -> None:
    """`add` sums `by` in place of `terms` (put where `terms[0]` was), whose nodes go."""
    first = add.inputs.index(terms[0])
    replaced = set(terms)
    kept = [r for r in add.inputs if r not in replaced]
    add.inputs = [*kept[:first], by, *kept[first:]]
    graph.remove([ref.node for ref in terms])


def finish_sum(add: Node) -> None:
    """`add`'s count of terms after replacements; an Identity where one term is left."""
    add.attrs["N"] = len(add.inputs)
    if len(add.inputs) == 1:
        add.op, add.attrs = "Identity", {"T": add.attrs["T"]}
