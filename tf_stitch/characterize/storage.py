"""The campaign's files in a logdir that may be any `tf.io.gfile` path (local, gs://, ...):
per-model records (`<logdir>/characterize/records/<model>.json`, written last and atomically,
so a record means the model's profiles are all in place), logs, and copying profiles in and out.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import tensorflow as tf

RECORDS = "characterize/records"
LOGS = "characterize/logs"


def join(*parts: str) -> str:
    return "/".join(p.rstrip("/") for p in parts if p)


def is_local(path: str) -> bool:
    return "://" not in path


def write_text(path: str, text: str) -> None:
    """Writes `path` whole or not at all (a temporary name beside it, then a rename)."""
    parent = path.rsplit("/", 1)[0]
    tf.io.gfile.makedirs(parent)
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
    with tf.io.gfile.GFile(tmp, "w") as f:
        f.write(text)
    tf.io.gfile.rename(tmp, path, overwrite=True)


def record_path(logdir: str, model: str) -> str:
    return join(logdir, RECORDS, f"{safe_name(model)}.json")


def safe_name(model: str) -> str:
    """A file/run name for a model spec (`pkg.mod:fn` -> `pkg.mod_fn`)."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in model)


def write_record(logdir: str, record: dict[str, Any]) -> None:
    write_text(record_path(logdir, record["model"]), json.dumps(record, indent=1, default=str))


def read_record(logdir: str, model: str) -> dict[str, Any] | None:
    path = record_path(logdir, model)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        try:
            return dict(json.load(f))
        except json.JSONDecodeError:
            return None  # a record that cannot be read counts as not done


def read_records(logdir: str) -> list[dict[str, Any]]:
    folder = join(logdir, RECORDS)
    if not tf.io.gfile.isdir(folder):
        return []
    out = []
    for name in sorted(tf.io.gfile.listdir(folder)):
        if name.endswith(".json"):
            with tf.io.gfile.GFile(join(folder, name)) as f:
                try:
                    out.append(dict(json.load(f)))
                except json.JSONDecodeError:
                    continue
    return out


def copy_tree(source: str, target: str) -> None:
    """Copies every file under `source` to the same place under `target` (gfile paths)."""
    for folder, _, files in tf.io.gfile.walk(source):
        rel = os.path.relpath(folder, source) if is_local(source) else folder[len(source) :]
        dest = join(target, rel.strip("/").replace(os.sep, "/")) if rel not in (".", "") else target
        tf.io.gfile.makedirs(dest)
        for name in files:
            tf.io.gfile.copy(join(folder, name), join(dest, name), overwrite=True)


def local_profiles(logdir: str, runs: list[str], scratch: Path) -> str:
    """A local logdir holding `runs`' profiles: `logdir` itself when it is local, else a copy
    of those runs under `scratch`."""
    if is_local(logdir):
        return logdir
    for run in runs:
        copy_tree(join(logdir, "plugins/tf_stitch", run), str(scratch / "plugins/tf_stitch" / run))
    return str(scratch)
