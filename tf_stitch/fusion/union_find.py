"""Disjoint sets of node names: the groups while the planner grows them."""

from __future__ import annotations


class UnionFind:
    def __init__(self, items: set[str]) -> None:
        self.parent = {i: i for i in items}
        self._members = {i: {i} for i in items}

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

    def members(self, root: str) -> set[str]:
        return self._members[root]

    def sets(self) -> list[set[str]]:
        return [m for r, m in self._members.items() if self.parent[r] == r]
