"""Detects kernel libraries in the cache that were corrupted, truncated or replaced after they
were written (a disk error, a copy cut short, an edit, another kernel's file): each library has
its sha256 beside it (`<key>.sha256`), written when it is compiled (before the library is put
in place), and checked before it is used again. A library without one is compiled again."""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

from tf_stitch.runtime import cache


def digest_path(library: Path) -> Path:
    return library.with_suffix(".sha256")


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def record(library: Path, digest: str | None = None) -> None:
    """Writes the digest of `library` (or `digest`, that of the bytes about to be published
    there) beside it, atomically."""
    cache.atomic_write(digest_path(library), (digest or sha256_of(library)) + "\n")


def intact(library: Path, warn: bool = True) -> bool:
    """Whether `library` exists and matches its recorded digest. An entry without a digest is
    never trusted (it may be another kernel's library, or one whose build did not finish): it
    is built again, and its digest recorded then. A mismatch is reported with a warning
    (`warn`)."""
    if not library.exists():
        return False
    try:
        recorded = digest_path(library).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return False
    if recorded == sha256_of(library):
        return True
    if recorded and warn:
        warnings.warn(
            f"tf_stitch: the cached kernel {library} does not match its recorded sha256 "
            "(corrupted or truncated); compiling it again",
            RuntimeWarning,
            stacklevel=3,
        )
    return False
