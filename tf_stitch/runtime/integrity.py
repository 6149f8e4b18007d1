"""Detects kernel libraries in the cache that were corrupted or truncated after they were
written (a disk error, a copy cut short, an edit): each library has its sha256 beside it
(`<key>.sha256`), written when it is compiled, and checked before it is used again."""

from __future__ import annotations

import contextlib
import hashlib
import warnings
from collections.abc import Callable
from pathlib import Path

from tf_stitch.runtime import cache


def digest_path(library: Path) -> Path:
    return library.with_suffix(".sha256")


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def record(library: Path) -> None:
    """Writes the digest of `library` beside it (atomically)."""
    cache.atomic_write(digest_path(library), sha256_of(library) + "\n")


def intact(library: Path, loads: Callable[[Path], None] | None = None) -> bool:
    """Whether `library` exists and matches its recorded digest. A library without a digest
    (the op installs carried binaries without one) counts as intact if `loads(library)` does
    not raise; its digest is then recorded. A mismatch is reported with a warning."""
    if not library.exists():
        return False
    try:
        recorded = digest_path(library).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        recorded = ""
    if not recorded:
        if loads is None:
            return True
        try:
            loads(library)
        except Exception:  # any failure to load means "rebuild it"
            return False
        with contextlib.suppress(OSError):  # a read-only cache: the library is still usable
            record(library)
        return True
    if recorded == sha256_of(library):
        return True
    warnings.warn(
        f"tf_stitch: the cached kernel {library} does not match its recorded sha256 (corrupted "
        "or truncated); compiling it again",
        RuntimeWarning,
        stacklevel=3,
    )
    return False
