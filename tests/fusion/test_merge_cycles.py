"""creates_cycle() walks only the window it needs and agrees with contracting every group and
looking for a cycle, on random DAGs with random groups."""

from __future__ import annotations

import random
from types import SimpleNamespace

from tf_stitch.fusion.merge import creates_cycle
from tf_stitch.fusion.union_find import UnionFind


def _contracted_has_cycle(edges: dict[str, list[str]], owner: dict[str, str]) -> bool:
    """Every group (and the union) as one node: does the quotient graph have a cycle?"""
    quotient: dict[str, set[str]] = {}
    for a, outs in edges.items():
        for b in outs:
            if owner[a] != owner[b]:
                quotient.setdefault(owner[a], set()).add(owner[b])
    state: dict[str, int] = {}

    def visit(n: str) -> bool:
        state[n] = 1
        for m in quotient.get(n, ()):
            if state.get(m) == 1 or (m not in state and visit(m)):
                return True
        state[n] = 2
        return False

    return any(n not in state and visit(n) for n in set(owner.values()))


def test_agrees_with_contracting_the_groups_on_random_graphs() -> None:
    rng = random.Random(0)
    checked = cycles = 0
    for _ in range(2000):
        n = rng.randint(4, 24)
        names = [f"n{i}" for i in range(n)]
        edges = {a: [b for b in names[i + 1 :] if rng.random() < 0.2] for i, a in enumerate(names)}
        groups = UnionFind(set(names), {x: i for i, x in enumerate(names)})
        for _ in range(rng.randint(0, n // 2)):
            groups.union(rng.choice(names), rng.choice(names))
        roots = sorted({groups.find(x) for x in names})
        if len(roots) < 2:
            continue
        a, b = rng.sample(roots, 2)
        union = groups.members(a) | groups.members(b)
        # The other groups must be acyclic among themselves, as the planner keeps them.
        owner = {x: groups.find(x) for x in names}
        if _contracted_has_cycle(edges, owner):
            continue
        owner.update({x: "union" for x in union})
        ctx = SimpleNamespace(late_order={x: i for i, x in enumerate(names)}, successors=edges)
        expected = _contracted_has_cycle(edges, owner)
        assert creates_cycle(ctx, union, groups) == expected, (edges, union)  # type: ignore[arg-type]
        checked += 1
        cycles += expected
    assert checked > 1000 and 0 < cycles < checked
