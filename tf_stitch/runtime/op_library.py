"""Builds, caches and loads the TensorFlow op library that defines `StitchedKernel`.

An install of tf_stitch carries the library, built by setup.py (prebuilt.py); it is loaded when
it matches the op sources, TensorFlow and machine. Otherwise the library is compiled once from
the sources in `tf_stitch/runtime/op/` against the installed TensorFlow and kept at
`cache_dir()/ops/<key>/libstitched_kernel_op.so`, where the key covers the source (and so its
`kOpLibraryVersion`), the TensorFlow version, the compile flags and the compiler. The compiler
is `$CXX`, else `c++`.

    module = load()
    outputs = module.stitched_kernel(inputs, Tout=[tf.float32], kernel_name=..., ...)
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import re
import shutil
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import tensorflow as tf

from tf_stitch.runtime import cache, leftovers, prebuilt
from tf_stitch.runtime.kernel_compiler import (
    KernelCompileError,
    check_loadable,
    compile_kernel,
    compiler_identity,
    run_compiler,
)

__all__ = [
    "BUILD_TIMEOUT_S",
    "LIBRARY_NAME",
    "OP_DIR",
    "OpLibraryBuildError",
    "build",
    "build_commands",
    "load",
    "load_if_possible",
    "loaded_path",
    "op_library_key",
    "op_library_path",
    "op_library_version",
    "stitched_kernel",
]

OP_DIR = prebuilt.OP_DIR
LIBRARY_NAME = prebuilt.LIBRARY_NAME
BUILD_TIMEOUT_S = 600.0
_VERSION_RE = re.compile(r"constexpr int kOpLibraryVersion = (\d+);")

_lock = threading.Lock()
_module: ModuleType | None = None
_loaded_path: Path | None = None


class OpLibraryBuildError(RuntimeError):
    """The StitchedKernel op library could not be built or loaded."""


def _compiler() -> tuple[str, ...]:
    return prebuilt.compiler()


def _source() -> str:
    """The op source and its headers: what the library's cache key covers."""
    return prebuilt.source_text()


def op_library_version() -> int:
    """The `kOpLibraryVersion` constant of the op source."""
    match = _VERSION_RE.search(_source())
    if match is None:
        raise OpLibraryBuildError(f"no source in {OP_DIR} defines kOpLibraryVersion")
    return int(match.group(1))


def build_commands(output: Path, objects: Path) -> tuple[list[list[str]], list[str]]:
    """The commands that compile the op library's sources into `objects` and link them into
    `output`."""
    return prebuilt.build_commands(output, objects)


def set_graph_rewriter(rewriter: Any) -> None:
    """Registers the graph optimization pass's rewriter (a ctypes function; None removes it):
    see tf_stitch/hook.py. Loads the op library if needed."""
    load()
    ctypes.CDLL(str(_loaded_path)).tf_stitch_set_graph_rewriter(rewriter)


def set_pass_string(out: int, data: bytes) -> None:
    """Writes the rewriter's answer into the pass's string at address `out`."""
    global _set_string
    if _set_string is None:  # looked up once, not at every rewrite
        _set_string = ctypes.CDLL(str(_loaded_path)).tf_stitch_set_string
        _set_string.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64]
    _set_string(out, data, len(data))


_set_string: Any = None


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
        "flags": build_commands(Path("OUT"), Path("OBJ")),
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
    with leftovers.scratch_dir() as scratch:  # the compiler never writes into the cache
        built = scratch / LIBRARY_NAME
        try:
            prebuilt.build_library(built, lambda c: run_compiler(c, timeout=BUILD_TIMEOUT_S))
        except KernelCompileError as e:
            message = f"building the StitchedKernel op library failed: {e}"
            raise OpLibraryBuildError(message) from None
        shutil.copyfile(built, output)


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


def time_trace_events(n: int, name: str = "model/layer/op", op_type: str = "Op") -> int:
    """Nanoseconds the op library takes to emit `n` host trace events at level 2 named
    "`name`:`op_type`" (as the executor names an op's event): recorded while a profiler
    session is active, a level check each otherwise. Loads the op library if needed."""
    load()
    function = ctypes.CDLL(str(_loaded_path)).tf_stitch_time_trace_events
    function.restype = ctypes.c_int64
    function.argtypes = [ctypes.c_int64, ctypes.c_char_p, ctypes.c_char_p]
    return int(function(n, name.encode(), op_type.encode()))


def load(packaged: bool = True) -> ModuleType:
    """Loads the op library once per process: the one built into the package at install time
    when it matches this source, TensorFlow and machine (`packaged`, see prebuilt.py), else
    the cache's, built first if needed (a C++ compiler).

    Returns the module made by `tf.load_op_library`; its `stitched_kernel` function creates
    the op. Registers the compiler that kernels not in the cache use (`_compile_for_op`).
    Thread-safe and idempotent.
    """
    global _module, _loaded_path
    with _lock:
        if _module is None:
            path = (prebuilt.packaged_library() if packaged else None) or build()
            try:
                _module = tf.load_op_library(str(path))
                _loaded_path = path
            except (tf.errors.OpError, OSError) as e:
                raise OpLibraryBuildError(f"cannot load {path}: {e}") from None
            ctypes.CDLL(str(path)).tf_stitch_set_compiler(_COMPILE_CALLBACK)
        return _module


def load_if_possible() -> None:
    """`load()`, keeping quiet if the library can be neither found nor built (no compiler):
    then `load()` raises when the op is first needed."""
    with contextlib.suppress(OpLibraryBuildError):
        load()


def loaded_path() -> Path | None:
    """The op library this process loaded, if it loaded one."""
    return _loaded_path


_CompileFn = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64
)


def _compile_for_op(source: int, size: int, key_out: int, error_out: int, error_size: int) -> int:
    """What the op calls (from any thread, taking the GIL) for a kernel that is neither in the
    cache nor carried as a binary that fits this machine: compiles its source into the cache
    and writes the key. Returns 0, or 1 with the reason in `error_out`; never raises."""
    try:
        text = ctypes.string_at(source, size).decode("utf-8")
        compiled = compile_kernel(text)
        check_loadable(compiled.path)
        ctypes.memmove(key_out, compiled.key.encode("ascii"), len(compiled.key))
        return 0
    except BaseException as e:  # nothing may propagate into C++
        reason = " ".join((str(e) or type(e).__name__).split())
        if isinstance(e, KernelCompileError) and reason.startswith("cannot run the compiler"):
            reason = (
                f"no C++ compiler ({reason}); install one (e.g. g++) or name it in $TF_STITCH_CXX"
            )
        message = reason.encode("utf-8", "replace")[: error_size - 1]
        ctypes.memmove(error_out, message + b"\0", len(message) + 1)
        return 1


_COMPILE_CALLBACK = _CompileFn(_compile_for_op)  # kept alive for the process's lifetime


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
