"""What the tab reads from a logdir, and nothing outside it.

Two kinds of runs:
- profiles (`tf_stitch.profile`): `<logdir>/plugins/tf_stitch/<run>/` with `meta.json`,
  `spans.jsonl.gz` and, for optimized graphs, `kernels.json`;
- benchmark runs (`tf-stitch bench`): `<logdir>/<run>/plugins/tf_stitch/bench.json`.

Run names are checked before any path is built (`BadRequest`); a run that is not there is
`NotFound`; a file that cannot be read or parsed is `Corrupt`. Loaded profiles are cached by
their files' modification times.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from tb_plugin import metadata

PROFILE_META, PROFILE_SPANS, PROFILE_KERNELS = "meta.json", "spans.jsonl.gz", "kernels.json"
BENCH_FILE = "bench.json"
MAX_RUN_NAME = 255
_BAD_NAME = re.compile(r"[/\\\x00]|\.\.|^\.?$|^[A-Za-z]:")


class BadRequest(ValueError):
    """A parameter the tab refuses (HTTP 400)."""


class NotFound(LookupError):
    """No such run (HTTP 404)."""


class Corrupt(RuntimeError):
    """The run's files cannot be read (HTTP 500 with a JSON error)."""


def check_name(name: str | None, what: str = "run") -> str:
    """`name` if it can only name an entry directly inside a folder; BadRequest otherwise."""
    if name is None or name == "":
        raise BadRequest(f"missing {what}")
    if len(name) > MAX_RUN_NAME or _BAD_NAME.search(name) or os.path.isabs(name):
        raise BadRequest(f"invalid {what} name {name[:80]!r}")
    return name


class Store:
    """The tf_stitch data of one logdir."""

    def __init__(self, logdir: str) -> None:
        self.logdir = Path(logdir) if logdir else None
        self._lock = threading.Lock()
        self._profiles: dict[str, tuple[float, Any]] = {}

    # -- listing -------------------------------------------------------------------------------
    def profile_dir(self) -> Path | None:
        return self.logdir / metadata.PROFILES_DIR if self.logdir else None

    def runs(self) -> dict[str, list[str]]:
        """{"profiles": [...], "bench": [...]}, sorted by name."""
        out: dict[str, list[str]] = {"profiles": [], "bench": []}
        root = self.profile_dir()
        if root is not None and root.is_dir():
            out["profiles"] = sorted(
                p.name
                for p in root.iterdir()
                if (p / PROFILE_META).is_file() and _visible(p) and self._inside(p)
            )
        if self.logdir is not None and self.logdir.is_dir():
            out["bench"] = sorted(
                p.name
                for p in self.logdir.iterdir()
                if (p / metadata.PLUGIN_DIR / BENCH_FILE).is_file()
                and _visible(p)
                and self._inside(p)
            )
        return out

    def _inside(self, path: Path) -> bool:
        """Whether `path`, links resolved, is in the logdir: a run linked to a folder outside
        it is not served."""
        assert self.logdir is not None
        return path.resolve().is_relative_to(self.logdir.resolve())

    # -- profiles ------------------------------------------------------------------------------
    def _profile_path(self, run: str | None) -> Path:
        name = check_name(run)
        root = self.profile_dir()
        path = root / name if root is not None else None
        if path is None or not (path / PROFILE_META).is_file() or not self._inside(path):
            raise NotFound(f"no tf_stitch profile named {name!r} in this logdir")
        return path

    def meta(self, run: str | None) -> dict[str, Any]:
        path = self._profile_path(run) / PROFILE_META
        return _read_json(path)

    def profile(self, run: str | None) -> Any:
        """The run's `tf_stitch.Profile` (cached until its files change)."""
        path = self._profile_path(run)
        stamp = max(f.stat().st_mtime for f in path.iterdir())
        with self._lock:
            hit = self._profiles.get(path.name)
            if hit is not None and hit[0] == stamp:
                return hit[1]
        from tf_stitch.profiler.profile import Profile

        try:
            loaded = Profile.load(path.parent.parent.parent, path.name)
        except (OSError, ValueError, KeyError, EOFError) as e:
            raise Corrupt(f"the profile {path.name!r} cannot be read: {e}") from None
        with self._lock:
            self._profiles[path.name] = (stamp, loaded)
        return loaded

    # -- bench runs ----------------------------------------------------------------------------
    def bench(self, run: str | None) -> dict[str, Any]:
        name = check_name(run)
        if self.logdir is None:
            raise NotFound("no logdir")
        path = self.logdir / name / metadata.PLUGIN_DIR / BENCH_FILE
        if not path.is_file() or not self._inside(path):
            raise NotFound(f"no tf-stitch bench run named {name!r} in this logdir")
        return _read_json(path)

    def xplane_exists(self, run: str) -> bool:
        if self.logdir is None:
            return False
        folder = self.logdir / "plugins" / "profile" / check_name(run)
        return folder.is_dir() and any(folder.glob("*.xplane.pb"))


def _visible(path: Path) -> bool:
    return not path.name.startswith(".")  # staging folders of writes in progress


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise Corrupt(f"{path.name} of run {path.parent.name!r} cannot be read: {e}") from None
    if not isinstance(data, dict):
        raise Corrupt(f"{path.name} of run {path.parent.name!r} is not a JSON object")
    return data
