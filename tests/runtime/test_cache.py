"""The cache directory and atomic, locked writes into it."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tf_stitch.runtime import cache

REPO_ROOT = Path(__file__).resolve().parents[2]


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# -- cache_dir ---------------------------------------------------------------------------------
def test_cache_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("TF_STITCH_CACHE_DIR", raising=False)
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "tf_stitch"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "tf_stitch"
    monkeypatch.setenv("TF_STITCH_CACHE_DIR", str(tmp_path / "explicit"))
    assert cache.cache_dir() == tmp_path / "explicit"


def test_empty_variables_count_as_unset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    monkeypatch.setenv("TF_STITCH_CACHE_DIR", "")
    assert cache.cache_dir() == tmp_path / ".cache" / "tf_stitch"


# -- atomic_write ------------------------------------------------------------------------------
def test_atomic_write_creates_parents_and_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "entry.bin"
    cache.atomic_write(target, b"\x00\x01binary")
    assert target.read_bytes() == b"\x00\x01binary"
    cache.atomic_write(target, "text, replaced: é")
    assert target.read_text(encoding="utf-8") == "text, replaced: é"
    assert names(target.parent) == [".entry.bin.lock", "entry.bin"]


def test_lock_path_is_a_hidden_sibling(tmp_path: Path) -> None:
    assert cache.lock_path(tmp_path / "x.so") == tmp_path / ".x.so.lock"


def test_temp_path_is_removed_unless_published(tmp_path: Path) -> None:
    target = tmp_path / "entry.so"
    with cache.temp_path(target, ".so") as tmp:
        assert tmp.parent == tmp_path and tmp.name.endswith(".so") and tmp.exists()
    assert not tmp.exists()
    with cache.temp_path(target) as tmp:
        tmp.write_text("done")
        cache.publish(tmp, target)
    assert names(tmp_path) == ["entry.so"]
    assert target.read_text() == "done"


# -- build_once --------------------------------------------------------------------------------
def test_build_once_builds_only_when_missing(tmp_path: Path) -> None:
    target = tmp_path / "lib" / "entry.so"
    calls: list[Path] = []

    def build(tmp: Path) -> None:
        calls.append(tmp)
        tmp.write_text("built")

    assert cache.build_once(target, build, suffix=".so") is True
    assert cache.build_once(target, build, suffix=".so") is False
    assert len(calls) == 1 and calls[0].name.endswith(".so")
    assert target.read_text() == "built"
    assert names(target.parent) == [".entry.so.lock", "entry.so"]


def test_failed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "entry.so"

    def build(tmp: Path) -> None:
        tmp.write_text("half")
        raise RuntimeError("compiler exploded")

    with pytest.raises(RuntimeError, match="compiler exploded"):
        cache.build_once(target, build)
    assert names(tmp_path) == [".entry.so.lock"]


def test_threads_building_the_same_entry_build_once(tmp_path: Path) -> None:
    target = tmp_path / "entry"
    calls: list[int] = []

    def build(tmp: Path) -> None:
        calls.append(1)
        time.sleep(0.2)
        tmp.write_text("payload")

    threads = [threading.Thread(target=cache.build_once, args=(target, build)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert target.read_text() == "payload"


# -- several processes -------------------------------------------------------------------------
_BUILDER = """
import sys, time
from pathlib import Path
from tf_stitch.runtime import cache
target, log = Path(sys.argv[1]), Path(sys.argv[2])

def build(tmp):
    with open(log, "a") as f:
        f.write("built\\n")
    time.sleep(0.5)
    tmp.write_bytes(b"x" * 1_000_000)

cache.build_once(target, build)
assert target.read_bytes() == b"x" * 1_000_000
"""

_WRITER = """
import sys
from pathlib import Path
from tf_stitch.runtime import cache
target, letter, rounds = Path(sys.argv[1]), sys.argv[2].encode(), int(sys.argv[3])
for _ in range(rounds):
    cache.atomic_write(target, letter * 200_000)
"""


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_all(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        _, err = proc.communicate(timeout=600)  # a safety net: slow on a busy machine
        assert proc.returncode == 0, err


def test_processes_building_the_same_entry_all_succeed_and_build_once(tmp_path: Path) -> None:
    target, log = tmp_path / "cache" / "entry.so", tmp_path / "build.log"
    wait_all([spawn(_BUILDER, str(target), str(log)) for _ in range(3)])
    assert log.read_text() == "built\n"
    assert names(target.parent) == [".entry.so.lock", "entry.so"]


def test_readers_never_see_a_torn_file(tmp_path: Path) -> None:
    target = tmp_path / "entry.bin"
    writers = [spawn(_WRITER, str(target), letter, "40") for letter in "ab"]
    seen: set[bytes] = set()
    while any(w.poll() is None for w in writers):
        try:
            data = target.read_bytes()
        except FileNotFoundError:
            continue
        assert len(data) == 200_000 and data in (b"a" * 200_000, b"b" * 200_000)
        seen.add(data[:1])
    wait_all(writers)
    assert seen  # The reader did observe the file while it was being rewritten.
    assert names(tmp_path) == [".entry.bin.lock", "entry.bin"]


def test_replace_dir_is_all_or_nothing(tmp_path: Path) -> None:
    from tf_stitch.runtime.cache import replace_dir

    final = tmp_path / "runs" / "r"
    replace_dir(final, lambda d: (d / "a.txt").write_text("one"))
    assert (final / "a.txt").read_text() == "one"

    def fails(d: Path) -> None:
        (d / "a.txt").write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        replace_dir(final, fails)
    assert (final / "a.txt").read_text() == "one"  # the old one stays whole
    assert sorted(p.name for p in final.parent.iterdir()) == ["r"]  # no staging left over
    replace_dir(final, lambda d: (d / "b.txt").write_text("two"))
    assert sorted(p.name for p in final.iterdir()) == ["b.txt"]


def test_replace_dir_publishes_with_a_plain_directorys_mode(tmp_path: Path) -> None:
    from tf_stitch.runtime.cache import replace_dir

    previous = os.umask(0o022)
    try:
        (tmp_path / "plain").mkdir()
        final = replace_dir(tmp_path / "published", lambda d: (d / "a.txt").write_text("one"))
    finally:
        os.umask(previous)
    mode = stat.S_IMODE(final.stat().st_mode)
    assert mode == stat.S_IMODE((tmp_path / "plain").stat().st_mode) == 0o755
