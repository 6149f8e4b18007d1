"""What the tab reads from a logdir, and nothing outside it.

Two kinds of runs:
- profiles (`tf_stitch.profile`): `<logdir>/plugins/tf_stitch/<run>/` with `meta.json`,
  `spans.jsonl.gz` and, for optimized graphs, `kernels.json`;
- benchmark runs (`tf-stitch bench`): `<logdir>/<run>/plugins/tf_stitch/bench.json`.

Run names are checked before any path is built (`BadRequest`); a run that is not there is
`NotFound`; a file that cannot be read or parsed is `Corrupt`. Every file the tab opens must be a
regular file whose real path (links resolved) is inside the logdir: a run with a file that links
elsewhere (or to a device) is neither listed nor served. The last `MAX_CACHED_PROFILES` loaded
profiles are kept (least recently used first out), each until its files change.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from werkzeug.security import safe_join

from tb_plugin import metadata

PROFILE_META, PROFILE_SPANS = metadata.PROFILE_META, metadata.PROFILE_SPANS
PROFILE_KERNELS, PROFILE_OPS = metadata.PROFILE_KERNELS, metadata.PROFILE_OPS
PROFILE_DECISIONS = metadata.PROFILE_DECISIONS
# Every file of a profile run the tab (through tf_stitch.Profile.load) may open.
PROFILE_FILES = (PROFILE_META, PROFILE_SPANS, PROFILE_KERNELS, PROFILE_OPS, PROFILE_DECISIONS)
BENCH_FILE = metadata.BENCH_FILE
MAX_CACHED_PROFILES = 16


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
    if metadata.run_name_problem(name):
        raise BadRequest(f"invalid {what} name {name[:80]!r}")
    return name


class Store:
    """The tf_stitch data of one logdir."""

    def __init__(self, logdir: str, max_cached: int = MAX_CACHED_PROFILES) -> None:
        self.logdir = Path(logdir) if logdir else None
        self._lock = threading.Lock()
        self._max_cached = max_cached
        self._profiles: OrderedDict[str, tuple[tuple[float, ...], Any]] = OrderedDict()

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
                if _visible(p) and self._servable(p, PROFILE_FILES, PROFILE_META)
            )
        if self.logdir is not None and self.logdir.is_dir():
            out["bench"] = sorted(
                p.name
                for p in self.logdir.iterdir()
                if _visible(p)
                and self._servable(p / metadata.PLUGIN_DIR, (BENCH_FILE,), BENCH_FILE)
            )
        return out

    def _inside(self, path: Path) -> bool:
        """Whether `path`, links resolved, is in the logdir."""
        assert self.logdir is not None
        return path.resolve().is_relative_to(self.logdir.resolve())

    def _servable(self, folder: Path, names: tuple[str, ...], required: str) -> bool:
        """Whether the run folder `folder` has `required`, and every file of `names` that it
        has is a regular file inside the logdir (links resolved): a folder or a file linked
        from outside it, a link to a device or a FIFO make the run unservable."""
        if not self._inside(folder) or not folder.is_dir():
            return False
        for name in names:
            joined = safe_join(str(folder), name)
            if joined is None:
                return False
            path = Path(joined)
            if not os.path.lexists(path):
                if name == required:
                    return False
                continue
            if not self._inside(path):
                return False
            try:
                if not stat.S_ISREG(path.stat().st_mode):
                    return False
            except OSError:  # a dangling link
                return False
        return True

    # -- profiles ------------------------------------------------------------------------------
    def _profile_path(self, run: str | None) -> Path:
        name = check_name(run)
        root = self.profile_dir()
        path = root / name if root is not None else None
        if path is None or not self._servable(path, PROFILE_FILES, PROFILE_META):
            raise NotFound(f"no tf_stitch profile named {name!r} in this logdir")
        return path

    def meta(self, run: str | None) -> dict[str, Any]:
        path = self._profile_path(run) / PROFILE_META
        return _read_json(path)

    def profile(self, run: str | None) -> Any:
        """The run's `tf_stitch.Profile` (cached until its files change)."""
        path = self._profile_path(run)
        stamp = tuple(
            (path / n).stat().st_mtime if (path / n).exists() else 0.0 for n in PROFILE_FILES
        )
        with self._lock:
            hit = self._profiles.get(path.name)
            if hit is not None and hit[0] == stamp:
                self._profiles.move_to_end(path.name)
                return hit[1]
        from tf_stitch.profiler.store.profile import Profile

        try:
            loaded = Profile.load(path.parent.parent.parent, path.name)
        except (OSError, ValueError, KeyError, EOFError) as e:
            raise Corrupt(f"the profile {path.name!r} cannot be read: {e}") from None
        with self._lock:
            self._profiles[path.name] = (stamp, loaded)
            self._profiles.move_to_end(path.name)
            while len(self._profiles) > self._max_cached:
                self._profiles.popitem(last=False)
        return loaded

    def cached_runs(self) -> list[str]:
        """The profiles held in memory, least recently used first."""
        with self._lock:
            return list(self._profiles)

    # -- bench runs ----------------------------------------------------------------------------
    def bench(self, run: str | None) -> dict[str, Any]:
        name = check_name(run)
        if self.logdir is None:
            raise NotFound("no logdir")
        folder = self.logdir / name / metadata.PLUGIN_DIR
        if not self._servable(folder, (BENCH_FILE,), BENCH_FILE):
            raise NotFound(f"no tf-stitch bench run named {name!r} in this logdir")
        return _read_json(folder / BENCH_FILE)

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
