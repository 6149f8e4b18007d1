"""Writes a directory so that it appears whole or not at all."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_atomically(final: Path, fill: Callable[[Path], None]) -> Path:
    """Makes the directory `final` from what `fill(staging)` writes into a new directory beside
    it, then renames it into place. An existing `final` (empty, or being overwritten) is moved
    aside first and removed only once the new one is in place, so a failure at any point
    leaves either the old directory or nothing, never a half-written one."""
    final = final.absolute()
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.partial-", dir=final.parent))
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
