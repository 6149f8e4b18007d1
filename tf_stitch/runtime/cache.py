"""The on-disk cache shared by all tf_stitch processes, and safe ways to write into it.

Entries are written once and never modified: a writer produces the file under a temporary name
in the entry's own directory, flushes it to disk and renames it into place with `os.replace`,
which is atomic on POSIX file systems, so a reader sees either no file or the complete file.
Writers of the same entry serialize on an exclusive `fcntl.flock` of a lock file next to the
entry, so that concurrent processes (and threads) building the same entry both succeed and the
expensive build runs once.

The cache directory is `$TF_STITCH_CACHE_DIR`, else `$XDG_CACHE_HOME/tf_stitch`, else
`~/.cache/tf_stitch`. The StitchedKernel op's C++ code resolves it the same way.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import pwd
import secrets
import shutil
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

from tf_stitch.runtime.leftovers import owner_tag

__all__ = [
    "atomic_write",
    "build_once",
    "cache_dir",
    "copy_in",
    "lock_path",
    "locked",
    "publish",
    "temp_path",
    "use_temporary_cache",
]


_temporary_lock = threading.Lock()


def use_temporary_cache(error: OSError) -> Path:
    """Switches this process to a fresh temporary cache (via `$TF_STITCH_CACHE_DIR`, which the
    op's C++ code reads too) after `error` showed that the cache cannot be written; warns once.
    Kernels are then compiled into it for this process only; it is removed at exit."""
    with _temporary_lock:
        current = cache_dir()
        if current.name.startswith(_TEMPORARY_PREFIX) and os.access(current, os.W_OK):
            return current  # another thread switched already
        tmp = Path(tempfile.mkdtemp(prefix=f"{_TEMPORARY_PREFIX}{owner_tag()}_"))
        atexit.register(shutil.rmtree, tmp, True)  # (after kill -9: leftovers.sweep_temp)
        warnings.warn(
            f"tf_stitch: the cache {current} cannot be written ({error}); kernels are compiled "
            f"into {tmp} for this process (set TF_STITCH_CACHE_DIR to a writable directory)",
            RuntimeWarning,
            stacklevel=3,
        )
        os.environ["TF_STITCH_CACHE_DIR"] = str(tmp)
        return tmp


_TEMPORARY_PREFIX = "tf_stitch_cache_"


def cache_dir() -> Path:
    """Returns the cache root; it need not exist yet. Empty variables count as unset."""
    explicit = os.environ.get("TF_STITCH_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "tf_stitch"
    return _home() / ".cache" / "tf_stitch"


def _home() -> Path:
    """$HOME, else (unset or empty) the password database's home directory."""
    return Path(os.environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir)


def lock_path(path: Path) -> Path:
    """The lock file that guards writes of `path`: a hidden `.<name>.lock` beside it."""
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Holds an exclusive inter-process lock on the cache entry `path` (creating its directory).

    The lock is an `fcntl.flock` on `lock_path(path)`. Lock files are left in place: deleting
    one would race with a process that has just opened it. The lock is not re-entrant: do not
    nest `locked` (or `atomic_write` / `build_once`) for the same path.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # Closing the descriptor releases the lock.


@contextlib.contextmanager
def temp_path(target: Path, suffix: str = "") -> Iterator[Path]:
    """Yields a fresh, empty temporary file in `target`'s directory, named for this process
    (leftovers.py removes it if the process is killed); it is removed on exit unless it was
    renamed away (e.g. by `publish`)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(
        prefix=f".{target.name}.{owner_tag()}.", suffix=f".tmp{suffix}", dir=target.parent
    )
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
    finally:
        tmp.unlink(missing_ok=True)


def _fsync_path(path: Path, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(tmp: Path, dest: Path) -> None:
    """Atomically moves the finished file `tmp` (same directory as `dest`) to `dest`.

    The data is flushed before the rename and the directory after it, so that after a crash
    `dest` is either absent or complete.
    """
    _fsync_path(tmp)
    os.replace(tmp, dest)
    _fsync_path(dest.parent, os.O_DIRECTORY)


def copy_in(source: Path, dest: Path) -> None:
    """Copies the file `source` (made outside the cache) to `dest` atomically."""
    with temp_path(dest) as tmp:
        shutil.copyfile(source, tmp)
        publish(tmp, dest)


def atomic_write(path: Path, data: bytes | str) -> None:
    """Writes `data` (str is UTF-8 encoded) to `path` atomically, under `path`'s lock."""
    payload = data.encode() if isinstance(data, str) else data
    with locked(path), temp_path(path) as tmp:
        tmp.write_bytes(payload)
        publish(tmp, path)


def replace_dir(final: Path, fill: Callable[[Path], None]) -> Path:
    """Makes the directory `final` with what `fill(staging)` writes into a new directory next to
    it, then renames that into place: readers never see it half written. An older `final` is
    moved aside first and removed only once the new one is in place, so a failure at any point
    leaves the old directory or nothing, never a partial one."""
    final = final.absolute()
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = _new_dir(final.parent, f".{final.name}.partial-")
    old: Path | None = None
    try:
        fill(staging)
        if final.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old-", dir=final.parent))
            old.rmdir()
            final.rename(old)
        staging.rename(final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if old is not None and not final.exists():
            old.rename(final)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _new_dir(parent: Path, prefix: str) -> Path:
    """A new empty directory `<prefix><random>` in `parent`, with the mode a plain mkdir gives
    (0777 less the umask): mkdtemp's 0700 would keep other users, such as a model server or a
    TensorBoard running as someone else, from reading what is published."""
    for _ in range(100):
        path = parent / f"{prefix}{secrets.token_hex(4)}"
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no free name {prefix}* in {parent}")


def build_once(path: Path, build: Callable[[Path], None], suffix: str = "") -> bool:
    """Makes sure the cache entry `path` exists, calling `build(tmp)` to produce it if needed.

    `build` must write the entry's content to the temporary file `tmp` (which exists, empty,
    and ends with `suffix`); it is then published atomically. Concurrent callers for the same
    path wait for each other, so `build` runs at most once. Returns True if this call built it.
    Exceptions from `build` propagate and leave nothing behind.
    """
    if path.exists():
        return False
    with locked(path):
        if path.exists():  # Another process built it while we waited for the lock.
            return False
        with temp_path(path, suffix) as tmp:
            build(tmp)
            publish(tmp, path)
    return True
