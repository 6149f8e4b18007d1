"""The progress bar long commands print."""

from __future__ import annotations

import io

import pytest

from tf_stitch.progress import Progress


def test_a_log_gets_one_line_per_update_with_the_time_left() -> None:
    out = io.StringIO()
    bar = Progress(4, out, "bench")
    bar.update(0, "lr: build")
    bar.update(2, "lr: timing")
    bar.update(4, "done")
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("bench [........................] 0/4 lr: build · ")
    assert "[############............] 2/4 lr: timing" in lines[1] and "left" in lines[1]
    assert "4/4 done" in lines[2] and "left" not in lines[2]


def test_a_terminal_gets_one_redrawn_line() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    bar = Progress(2, out, "timing")
    bar(1, 2)
    bar(2, 2)
    text = out.getvalue()
    assert text.count("\r") == 2 and text.endswith("\n") and text.count("\n") == 1


def test_needs_something_to_count() -> None:
    with pytest.raises(ValueError, match="total"):
        Progress(0, io.StringIO())
