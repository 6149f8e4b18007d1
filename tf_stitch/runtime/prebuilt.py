"""The op library built when tf_stitch is installed, so that a machine without a C++ compiler
can still run StitchedKernel nodes (a converted SavedModel carries its kernels' binaries, but
the op itself must be registered by a library built against this TensorFlow).

`setup.py` runs `build_into(<package>/tf_stitch/runtime/_ops)` at install time (a wheel, or
the source tree for an editable install); `packaged_library()` returns that library when it was
built from the same op source, for the same TensorFlow and machine, and None otherwise (then
the op library is built into the cache as before). This module imports nothing from tf_stitch
(setup.py loads it by path, before the package's dependencies are installed).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

RUNTIME_DIR = Path(__file__).resolve().parent
PACKAGED_DIR = RUNTIME_DIR / "_ops"
LIBRARY_NAME = "libstitched_kernel_op.so"
STAMP_NAME = "libstitched_kernel_op.json"
# The op library's sources: the ops, their kernels, tf_stitch.enable()'s graph optimization pass
# (op/common.h says which file holds what). Every .cc is compiled on its own, all at once.
OP_DIR = RUNTIME_DIR / "op"
OP_SOURCES = tuple(sorted(OP_DIR.glob("*.cc")))
OP_HEADERS = tuple(sorted(OP_DIR.glob("*.h")))
BASE_FLAGS = ("-std=c++17", "-fPIC", "-O2")  # and TensorFlow's compile flags


def source_text() -> str:
    """The op sources and their headers, as one text (what a library's identity covers)."""
    return "\n".join(p.read_text(encoding="utf-8") for p in (*OP_SOURCES, *OP_HEADERS))


def source_digest() -> str:
    return hashlib.sha256(source_text().encode()).hexdigest()


def compiler() -> tuple[str, ...]:
    """The op library's compiler: `$CXX`, else `c++` (shell-split)."""
    return tuple(shlex.split(os.environ.get("CXX") or "c++"))


def build_commands(output: Path, objects: Path) -> tuple[list[list[str]], list[str]]:
    """The commands that build the op library into `output`: one compile per source (each
    writing its object file into the directory `objects`), then the link."""
    import tensorflow as tf

    compiles = [
        [
            *compiler(),
            *BASE_FLAGS,
            *tf.sysconfig.get_compile_flags(),
            "-c",
            str(source),
            "-o",
            str(objects / f"{source.stem}.o"),
        ]
        for source in OP_SOURCES
    ]
    link = [
        *compiler(),
        "-shared",
        "-o",
        str(output),
        *(c[-1] for c in compiles),
        *tf.sysconfig.get_link_flags(),
    ]
    return compiles, link


def build_library(output: Path, run: Callable[[list[str]], object]) -> None:
    """Builds the op library into `output`: the sources compiled at once, one per core, by
    `run` (which raises if a command fails), then linked. The objects go to a temporary
    directory, removed after."""
    with tempfile.TemporaryDirectory(prefix="tf_stitch_op_objects_") as objects:
        compiles, link = build_commands(output, Path(objects))
        cores = max(1, min(len(compiles), os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=cores) as pool:
            for _ in pool.map(run, compiles):  # the first failure is raised
                pass
        run(link)


def _run(command: list[str], timeout: float) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"cannot run {shlex.join(command)}: {e}") from None
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-20:])
        raise RuntimeError(f"{shlex.join(command)} failed:\n{tail}")


def identity() -> dict[str, str]:
    """What a packaged library must have been built for to be loaded here."""
    import tensorflow as tf

    return {
        "source_sha256": source_digest(),
        "tensorflow": tf.version.VERSION,
        "machine": platform.machine(),
    }


def packaged_library(directory: Path = PACKAGED_DIR) -> Path | None:
    """The library in `directory` if its stamp matches this source, TensorFlow and machine."""
    library, stamp = directory / LIBRARY_NAME, directory / STAMP_NAME
    try:
        recorded = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not library.is_file() or not isinstance(recorded, dict):
        return None
    current = identity()
    return library if all(recorded.get(k) == v for k, v in current.items()) else None


def build_into(directory: Path, timeout: float = 600.0) -> Path:
    """Compiles the op library into `directory` with its stamp (both written atomically, the
    library first). Raises RuntimeError saying why if it cannot be built."""
    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{LIBRARY_NAME}.", suffix=".tmp.so", dir=directory)
    os.close(fd)
    tmp = Path(name)
    try:
        build_library(tmp, lambda command: _run(command, timeout))
        os.chmod(tmp, 0o755)  # mkstemp made it private; every user of the install loads it
        os.replace(tmp, directory / LIBRARY_NAME)
        stamp_tmp = directory / f".{STAMP_NAME}.tmp"
        stamp_tmp.write_text(json.dumps(identity(), indent=1) + "\n", encoding="utf-8")
        os.replace(stamp_tmp, directory / STAMP_NAME)
    finally:
        tmp.unlink(missing_ok=True)
    return directory / LIBRARY_NAME
