"""What a process killed in the middle of its work leaves behind, and its removal.

Compilers run in a scratch folder of their own in the temp directory, never in the cache; what
tf_stitch writes into the cache goes through a temporary file renamed into place. A `kill -9`
can still leave those temporary files, a scratch folder (with a compiler that outlives its
parent still writing into it), or a fallback cache. Each carries its writer in its name, as
`pid<PID>@<host>`, and the first compile of every process removes what writers of this host that
are no longer running left, and what other hosts (a shared cache) left more than a day ago.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

# `pid1234@host` in a name, between separators.
_OWNER = re.compile(r"(?:^|[._])pid(\d+)@([A-Za-z0-9-]*)(?=[._])")
# Entries of the temp directory that tf_stitch makes: scratch folders, fallback caches, kernels
# the op loads from there.
TEMP_PREFIXES = ("tf_stitch_build_", "tf_stitch_cache_", "tf_stitch_kernel_")
FOREIGN_AGE_S = 24 * 3600.0

_swept: set[str] = set()
_swept_lock = threading.Lock()


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:32]


def owner_tag() -> str:
    """`pid<PID>@<host>` of this process, for the names of the files it writes."""
    return f"pid{os.getpid()}@{_host()}"


@contextlib.contextmanager
def scratch_dir(kind: str = "build") -> Iterator[Path]:
    """A fresh folder in the temp directory, named for this process, removed on exit."""
    with tempfile.TemporaryDirectory(prefix=f"tf_stitch_{kind}_{owner_tag()}_") as path:
        yield Path(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def abandoned(path: Path, now: float | None = None) -> bool:
    """Whether `path` (named with its writer's tag) was left by a writer that is gone: a
    process of this host that no longer runs, or one of another host more than a day ago."""
    match = _OWNER.search(path.name)
    if match is None:
        return False
    pid, host = int(match.group(1)), match.group(2)
    if host == _host():
        return pid != os.getpid() and not _alive(pid)
    try:
        age = (now or time.time()) - path.lstat().st_mtime
    except OSError:
        return False
    return age > FOREIGN_AGE_S


def _remove(path: Path) -> bool:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        return False
    except OSError:  # not ours to remove, or in use: left for another sweep
        return False
    return True


def sweep_cache(root: Path) -> list[Path]:
    """Removes the abandoned temporary files under the cache `root`; returns them."""
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    for path in root.rglob("*.tmp*"):
        if path.is_file() and abandoned(path) and _remove(path):
            removed.append(path)
    return removed


def sweep_temp(temp: Path | None = None) -> list[Path]:
    """Removes the abandoned scratch folders, fallback caches and kernel files of the temp
    directory; returns them."""
    folder = Path(temp or tempfile.gettempdir())
    removed: list[Path] = []
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            if entry.name.startswith(TEMP_PREFIXES) and abandoned(entry) and _remove(entry):
                removed.append(entry)
    return removed


def sweep_once(cache_root: Path) -> None:
    """The sweeps above, once per process for each cache root (and once for the temp dir)."""
    keys = (str(cache_root), "<temp>")
    with _swept_lock:
        todo = [k for k in keys if k not in _swept]
        _swept.update(todo)
    for key in todo:
        if key == "<temp>":
            sweep_temp()
        else:
            sweep_cache(cache_root)
