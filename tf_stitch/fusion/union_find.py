"""Disjoint sets of node names: the groups while the planner grows them."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping


class UnionFind:
    """Sets of names. Given each name's position (`order`), it also answers `reach`: how far
    the sets that start at or before a position extend."""

    def __init__(self, items: set[str], order: Mapping[str, int] | None = None) -> None:
        self.parent = {i: i for i in items}
        self._members = {i: {i} for i in items}
        self._order = order
        # Sets of several members: root -> (first, last) position; and, built on demand, the
        # sets' first positions sorted with the running maximum of their last ones.
        self._spans: dict[str, tuple[int, int]] = {}
        self._index: tuple[list[int], list[int]] | None = None

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
            self._spans[a] = (min(s[0] for s in spans), max(s[1] for s in spans))
            self._index = None

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
        if self._index is None:
            spans = sorted(self._spans.values())
            lasts, running = [], -1
            for _, last in spans:
                running = max(running, last)
                lasts.append(running)
            self._index = ([first for first, _ in spans], lasts)
        firsts, lasts = self._index
        i = bisect_right(firsts, position)
        return max(position, lasts[i - 1]) if i else position
