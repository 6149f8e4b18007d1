"""Disjoint sets of node names: the groups while the planner grows them."""

from __future__ import annotations

from collections.abc import Mapping


class UnionFind:
    """Sets of names. Given each name's position (`order`), it also answers `reach`: how far
    the sets that start at or before a position extend."""

    def __init__(self, items: set[str], order: Mapping[str, int] | None = None) -> None:
        self.parent = {i: i for i in items}
        self._members = {i: {i} for i in items}
        self._order = order
        # Sets of several members: root -> (first, last) position.
        self._spans: dict[str, tuple[int, int]] = {}
        # A Fenwick tree of prefix maxima: at each first position, the furthest last position
        # of a set starting there. A union's span covers both sets' spans, so the spans it
        # replaces never need taking out: the answers only grow (O(log n) a union or a query).
        size = max(order.values(), default=-1) + 2 if order is not None else 0
        self._furthest = [-1] * size

    def find(self, x: str) -> str:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        a, b = self.find(a), self.find(b)
        if a == b:
            return
        if len(self._members[a]) < len(self._members[b]):
            a, b = b, a
        self.parent[b] = a
        self._members[a] |= self._members.pop(b)
        if self._order is not None:
            spans = [self._span(a), self._span(b)]
            self._spans.pop(b, None)
            first, last = min(s[0] for s in spans), max(s[1] for s in spans)
            self._spans[a] = (first, last)
            i = first + 1
            while i < len(self._furthest):
                self._furthest[i] = max(self._furthest[i], last)
                i += i & -i

    def _span(self, root: str) -> tuple[int, int]:
        assert self._order is not None
        position = self._order[root]
        return self._spans.get(root, (position, position))

    def members(self, root: str) -> set[str]:
        return self._members[root]

    def sets(self) -> list[set[str]]:
        return [m for r, m in self._members.items() if self.parent[r] == r]

    def reach(self, position: int) -> int:
        """The last position of any set of several members that starts at or before
        `position` (`position` itself if there is none further): a path that goes beyond
        `position` can come back to it or before only through such a set. Needs `order`."""
        if self._order is None:
            raise ValueError("UnionFind.reach needs the names' order")
        furthest, i = position, min(position + 1, len(self._furthest) - 1)
        while i > 0:
            furthest = max(furthest, self._furthest[i])
            i -= i & -i
        return furthest
