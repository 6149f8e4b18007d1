"""Builds, caches and loads the TensorFlow op library that defines `StitchedKernel`.

The library is compiled once from `stitched_kernel_op.cc` against the installed TensorFlow and
kept at `cache_dir()/ops/<key>/libstitched_kernel_op.so`, where the key covers the source (and
so its `kOpLibraryVersion`), the TensorFlow version, the compile flags and the compiler. The
compiler is `$CXX`, else `c++`.

    module = load()
    outputs = module.stitched_kernel(inputs, Tout=[tf.float32], kernel_name=..., ...)
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import shlex
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import tensorflow as tf

from tf_stitch.runtime import cache
from tf_stitch.runtime.kernel_compiler import KernelCompileError, compiler_identity, run_compiler

__all__ = [
    "BUILD_TIMEOUT_S",
    "LIBRARY_NAME",
    "OP_SOURCE",
    "OpLibraryBuildError",
    "build",
    "build_command",
    "load",
    "op_library_key",
    "op_library_path",
    "op_library_version",
    "stitched_kernel",
]

OP_SOURCE = Path(__file__).with_name("stitched_kernel_op.cc")
LIBRARY_NAME = "libstitched_kernel_op.so"
BUILD_TIMEOUT_S = 600.0
_BASE_FLAGS = ("-std=c++17", "-shared", "-fPIC", "-O2")
_VERSION_RE = re.compile(r"constexpr int kOpLibraryVersion = (\d+);")

_lock = threading.Lock()
_module: ModuleType | None = None
_loaded_path: Path | None = None


class OpLibraryBuildError(RuntimeError):
    """The StitchedKernel op library could not be built or loaded."""


def _compiler() -> tuple[str, ...]:
    return tuple(shlex.split(os.environ.get("CXX") or "c++"))


# The headers stitched_kernel_op.cc includes from its own directory.
OP_HEADERS = tuple(OP_SOURCE.with_name(n) for n in ("cuda_driver.h", "stitched_kernel_gpu.h"))


def _source() -> str:
    """The op source and its headers: what the library's cache key covers."""
    return "\n".join(p.read_text(encoding="utf-8") for p in (OP_SOURCE, *OP_HEADERS))


def op_library_version() -> int:
    """The `kOpLibraryVersion` constant of the op source."""
    match = _VERSION_RE.search(_source())
    if match is None:
        raise OpLibraryBuildError(f"{OP_SOURCE} defines no kOpLibraryVersion")
    return int(match.group(1))


def build_command(output: Path, source: Path = OP_SOURCE) -> list[str]:
    """The command that compiles the op library from `source` into `output`."""
    return [
        *_compiler(),
        *_BASE_FLAGS,
        *tf.sysconfig.get_compile_flags(),
        "-o",
        str(output),
        str(source),
        *tf.sysconfig.get_link_flags(),
    ]


def op_library_key() -> str:
    """sha256 over the op source, its version, TensorFlow's version and flags and the compiler."""
    try:
        identity = compiler_identity(_compiler())
    except KernelCompileError as e:
        raise OpLibraryBuildError(str(e)) from None
    material = {
        "source": _source(),
        "version": op_library_version(),
        "tensorflow": tf.version.VERSION,
        "flags": build_command(Path("OUT"), Path("SRC")),
        "compiler": identity,
    }
    blob = json.dumps(material, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()


def op_library_path() -> Path:
    """Where the op library for the current source, TensorFlow and compiler lives."""
    return cache.cache_dir() / "ops" / op_library_key() / LIBRARY_NAME


def _compile(output: Path) -> None:
    print(
        "tf_stitch: building the StitchedKernel op library (once, ~10 s)...",
        file=sys.stderr,
        flush=True,
    )
    try:
        run_compiler(build_command(output), timeout=BUILD_TIMEOUT_S)
    except KernelCompileError as e:
        raise OpLibraryBuildError(f"building the StitchedKernel op library failed: {e}") from None


def build() -> Path:
    """Returns the op library's path, building it first if it is not in the cache."""
    path = op_library_path()
    cache.build_once(path, _compile, suffix=".so")
    return path


def set_kernel_tracing(on: bool) -> None:
    """Whether StitchedKernel runs record trace events (the profiler's kernel level). Loads the
    op library if it is not loaded yet."""
    load()
    library = ctypes.CDLL(str(_loaded_path))  # the handle of the library already loaded
    library.tf_stitch_set_kernel_tracing(ctypes.c_int(1 if on else 0))


def load() -> ModuleType:
    """Builds (once per cache) and loads (once per process) the op library.

    Returns the module made by `tf.load_op_library`; its `stitched_kernel` function creates
    the op. Thread-safe and idempotent.
    """
    global _module, _loaded_path
    with _lock:
        if _module is None:
            path = build()
            try:
                _module = tf.load_op_library(str(path))
                _loaded_path = path
            except (tf.errors.OpError, OSError) as e:
                raise OpLibraryBuildError(f"cannot load {path}: {e}") from None
        return _module


def stitched_kernel(
    inputs: Sequence[Any],
    *,
    Tout: Sequence[tf.DType],
    kernel_name: str,
    cache_key: str,
    source: str,
    input_ranks: Sequence[int],
    input_dims: Sequence[int],
    output_ranks: Sequence[int],
    output_dims: Sequence[int],
    unit_dims: Sequence[int],
    unit_cost: int,
    schedule: str = "",
    block_rows: int = 1,
    name: str | None = None,
) -> list[tf.Tensor]:
    """Creates a StitchedKernel op (loading the library if needed) and returns its outputs.

    The arguments are the op's attrs; `Tin` is inferred from `inputs`.
    """
    return load().stitched_kernel(
        inputs=list(inputs),
        Tout=list(Tout),
        kernel_name=kernel_name,
        cache_key=cache_key,
        source=source,
        input_ranks=list(input_ranks),
        input_dims=list(input_dims),
        output_ranks=list(output_ranks),
        output_dims=list(output_dims),
        unit_dims=list(unit_dims),
        unit_cost=unit_cost,
        schedule=schedule,
        block_rows=block_rows,
        name=name,
    )
