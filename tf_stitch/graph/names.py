"""Names in a graph: the scope a set of nodes shares, and a node name made a C identifier."""

from __future__ import annotations

from collections.abc import Sequence


def common_scope(names: Sequence[str]) -> str:
    """The name scope ("a/b/") every name is under, "" if none."""
    parts = [n.split("/")[:-1] for n in names]
    common: list[str] = []
    for level in zip(*parts, strict=False):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return "/".join(common) + "/" if common else ""


def c_identifier(name: str) -> str:
    """`name` with every character that is not a letter or a digit made "_"."""
    return "".join(c if c.isalnum() else "_" for c in name)
