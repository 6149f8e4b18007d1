"""What killed processes leave behind is removed: temporary files in the cache, scratch folders
and fallback caches in the temp directory. A `kill -9` during a compile leaves a clean cache
once another process compiles."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tf_stitch.runtime import cache, leftovers

ROOT = Path(__file__).parents[2]


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_names_carry_their_writer(tmp_path: Path) -> None:
    with cache.temp_path(tmp_path / "entry.so", ".so") as tmp:
        assert leftovers.owner_tag() in tmp.name and not leftovers.abandoned(tmp)
    with leftovers.scratch_dir() as scratch:
        assert scratch.name.startswith(f"tf_stitch_build_{leftovers.owner_tag()}_")


def test_only_files_of_dead_writers_are_removed(tmp_path: Path) -> None:
    host = leftovers.owner_tag().split("@")[1]
    dead, alive = _dead_pid(), os.getppid()
    folder = tmp_path / "kernels" / "ab"
    folder.mkdir(parents=True)
    files = {
        "dead": folder / f".k.so.pid{dead}@{host}.x1.tmp.so",
        "alive": folder / f".k.so.pid{alive}@{host}.x2.tmp.so",
        "other_host_new": folder / f".k.so.pid{dead}@elsewhere.x3.tmp.so",
        "other_host_old": folder / f".k.so.pid{dead}@elsewhere.x4.tmp.cc",
        "entry": folder / "k.so",
    }
    for path in files.values():
        path.write_text("x")
    old = time.time() - 2 * leftovers.FOREIGN_AGE_S
    os.utime(files["other_host_old"], (old, old))
    removed = leftovers.sweep_cache(tmp_path)
    assert sorted(removed) == sorted([files["dead"], files["other_host_old"]])
    assert all(files[k].exists() for k in ("alive", "other_host_new", "entry"))


def test_temp_dir_sweep(tmp_path: Path) -> None:
    host = leftovers.owner_tag().split("@")[1]
    dead = _dead_pid()
    build = tmp_path / f"tf_stitch_build_pid{dead}@{host}_abc"
    build.mkdir()
    (build / "kernel.so").write_text("x")
    fallback = tmp_path / f"tf_stitch_cache_pid{dead}@{host}_def"
    fallback.mkdir()
    kernel = tmp_path / f"tf_stitch_kernel_pid{dead}@{host}_ghijkl.so"
    kernel.write_text("x")
    mine = tmp_path / f"tf_stitch_cache_{leftovers.owner_tag()}_mno"
    mine.mkdir()
    unrelated = tmp_path / "someone_elses"
    unrelated.mkdir()
    assert sorted(leftovers.sweep_temp(tmp_path)) == sorted([build, fallback, kernel])
    assert mine.exists() and unrelated.exists()


# A compile of a kernel that takes a while (many functions), in a child that waits to be killed.
_SLOW_COMPILE = """
from tf_stitch.runtime.kernel_compiler import compile_kernel
body = "".join(
    f"extern \\"C\\" float f{i}(float x) {{ float y = x; for (int j = 0; j < {i % 7 + 3}; ++j) "
    f"y = y * 1.0001f + {i}.0f; return y; }}\\n" for i in range(1500)
)
print("compiling", flush=True)
compile_kernel('extern "C" int ts_abi_version(void) { return 1; }\\n' + body)
"""


def _compilers(markers: tuple[str, ...]) -> list[int]:
    """Processes (a compiler, maybe outliving its parent) whose command line names a marker."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if any(m.encode() in cmdline for m in markers):
                found.append(int(entry.name))
    return found


_AFTER = """
from tf_stitch.runtime.kernel_compiler import compile_kernel
compile_kernel('extern "C" int ts_abi_version(void) { return 1; }\\n// after the kill\\n')
"""


def test_kill_9_during_a_compile_leaves_a_clean_cache(kernel_cache: Path) -> None:
    env = {**os.environ, "TF_STITCH_CACHE_DIR": str(kernel_cache)}
    child = subprocess.Popen(
        [sys.executable, "-c", _SLOW_COMPILE], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "compiling"
    # The compiler's command line names its output: in a scratch folder, or in the cache.
    markers = (f"tf_stitch_build_pid{child.pid}@", str(kernel_cache))
    deadline = time.monotonic() + 120
    while not _compilers(markers) and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if child.poll() is not None:
        pytest.skip("the compile finished before it could be killed")
    child.send_signal(signal.SIGKILL)
    child.wait()
    deadline = time.monotonic() + 300  # the compiler goes on without its parent
    while _compilers(markers) and time.monotonic() < deadline:
        time.sleep(0.1)
    # The next process's first compile sweeps what the killed one left.
    subprocess.run([sys.executable, "-c", _AFTER], cwd=ROOT, env=env, check=True, timeout=300)
    assert [p.name for p in kernel_cache.rglob("*") if ".tmp" in p.name] == []
    temp = Path(os.environ.get("TMPDIR") or "/tmp")
    assert [p for p in temp.iterdir() if f"pid{child.pid}@" in p.name] == []


_FALLBACK = """
import os, warnings
from tf_stitch.runtime.kernel_compiler import compile_kernel
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    compile_kernel('extern "C" int ts_abi_version(void) { return 1; }\\n// fallback cache\\n')
print(os.environ["TF_STITCH_CACHE_DIR"])
"""


def test_a_fallback_cache_is_removed_when_its_process_ends(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, so the cache below it cannot be made")
    env = {**os.environ, "TF_STITCH_CACHE_DIR": str(blocker / "cache"), "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", _FALLBACK], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    fallback = Path(done.stdout.strip().splitlines()[-1])
    assert fallback.parent == tmp_path and fallback.name.startswith("tf_stitch_cache_pid")
    assert not fallback.exists()
