"""UnionFind: sets of names, and how far the sets that start before a position reach."""

from __future__ import annotations

import pytest

from tf_stitch.fusion.union_find import UnionFind


def test_union_and_members() -> None:
    sets = UnionFind({"a", "b", "c"})
    sets.union("a", "b")
    assert sets.find("a") == sets.find("b") != sets.find("c")
    assert sets.members(sets.find("a")) == {"a", "b"}
    assert sorted(map(sorted, sets.sets())) == [["a", "b"], ["c"]]


def test_reach_follows_the_sets_that_start_before_a_position() -> None:
    order = {name: i for i, name in enumerate("abcdefgh")}
    sets = UnionFind(set(order), order)
    assert sets.reach(3) == 3  # no set of several members yet
    sets.union("b", "g")  # spans 1..6
    sets.union("e", "f")  # spans 4..5
    assert sets.reach(0) == 0
    assert sets.reach(1) == 6 and sets.reach(3) == 6
    sets.union("a", "h")  # spans 0..7
    assert sets.reach(0) == 7
    sets.union("b", "a")  # 0..7 together
    assert sets.reach(0) == 7 and sets.reach(4) == 7


def test_reach_needs_the_order() -> None:
    with pytest.raises(ValueError, match="order"):
        UnionFind({"a"}).reach(0)
