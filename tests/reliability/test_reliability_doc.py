"""docs/RELIABILITY.md names the tests that prove each row: every file and test it names
exists, so the table cannot silently rot."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_named_in_the_table_exists() -> None:
    text = (ROOT / "docs" / "RELIABILITY.md").read_text(encoding="utf-8")
    cells = re.findall(r"`([\w/]+\.py)((?:::\w+)?)`((?:, `::\w+`)*)", text)
    assert len(cells) >= 25
    for path, first, more in cells:
        source = (ROOT / "tests" / path).read_text(encoding="utf-8")
        names = [first.lstrip(":"), *re.findall(r"::(\w+)", more)]
        for name in filter(None, names):
            assert re.search(rf"def {name}\(", source), f"{path} has no test {name}"
