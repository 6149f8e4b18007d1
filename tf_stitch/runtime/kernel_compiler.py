"""Compiles generated kernel sources into shared libraries in the content-addressed cache.

A kernel library lives at `cache_dir()/kernels/<key[:2]>/<key>.so`, next to the source it was
built from (`<key>.cc`). The key is a sha256 over everything that determines the binary: the
source, the compiler's identity (`<cxx> --version`), the flags, the CPU (the flags are
`-march=native`) and the kernel ABI version. The StitchedKernel op finds the library by the
same layout from its `cache_key` attr.

The compiler is `$TF_STITCH_CXX`, else `$CXX`, else `c++`; the variable may hold a command with
arguments (e.g. `ccache g++`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import re
import shlex
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tf_stitch.codegen.compilers import KernelCompileError
from tf_stitch.runtime import cache, integrity, leftovers

__all__ = [
    "ABI_VERSION",
    "COMPILE_TIMEOUT_S",
    "KERNEL_FLAGS",
    "SANITIZERS",
    "CompiledKernel",
    "KernelCompileError",
    "check_loadable",
    "compile_kernel",
    "compiler_command",
    "compiler_identity",
    "cpu_signature",
    "kernel_key",
    "kernel_path",
    "run_compiler",
    "sanitizer_flags",
]

ABI_VERSION = 1
"""Version of the kernel library C ABI (`ts_abi_version()` / `ts_run`) that the op expects."""

# 512-bit vectors where the CPU has them (measured ~11% faster on the compute-bound layer
# norm + GELU kernel on a Sapphire Rapids core; no effect without AVX-512). An x86 option only.
_X86_FLAGS: tuple[str, ...] = (
    ("-mprefer-vector-width=512",)
    if platform.machine().lower() in ("x86_64", "amd64", "i686", "i386")
    else ()
)

SANITIZERS = ("address", "undefined")


def sanitizer_flags(spec: str | None = None) -> tuple[str, ...]:
    """The flags of the sanitizer test mode: `$TF_STITCH_SANITIZE` (e.g. "address,undefined")
    builds every kernel with those sanitizers, any finding fatal. Kernels are loaded into the
    Python process, so AddressSanitizer's runtime must be preloaded (LD_PRELOAD, see
    tests/reliability/test_sanitizers.py). The flags are part of the cache key."""
    spec = os.environ.get("TF_STITCH_SANITIZE", "") if spec is None else spec
    chosen = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SANITIZERS]
    if unknown:
        raise ValueError(f"TF_STITCH_SANITIZE takes {', '.join(SANITIZERS)}; got {unknown}")
    if not chosen:
        return ()
    return (
        f"-fsanitize={','.join(chosen)}",
        "-fno-sanitize-recover=all",
        "-fno-omit-frame-pointer",
    )


KERNEL_FLAGS: tuple[str, ...] = (
    "-O3",
    "-std=c++17",
    "-shared",
    "-fPIC",
    "-fno-math-errno",
    "-fno-trapping-math",
    # Each op rounds its result, as TensorFlow's kernels do: a product contracted into an FMA
    # in one loop and not in another would make a recomputed value differ from the one a
    # reduction saw (softmax's x - max(x) is then not 0 but the product's rounding error, and
    # its exp inf). The matmul tile contracts on purpose (cpu_matmul.h).
    "-ffp-contract=off",
    "-fopenmp-simd",
    *_X86_FLAGS,
    "-march=native",
    *sanitizer_flags(),
)
COMPILE_TIMEOUT_S = 120.0
_STDERR_TAIL_LINES = 20
_KEY_RE = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class CompiledKernel:
    """A compiled kernel library: its cache key and the path of its `.so`."""

    key: str
    path: Path


def compiler_command() -> tuple[str, ...]:
    """The kernel compiler command: `$TF_STITCH_CXX`, else `$CXX`, else `c++` (shell-split)."""
    spec = os.environ.get("TF_STITCH_CXX") or os.environ.get("CXX") or "c++"
    return tuple(shlex.split(spec))


def _tail(text: str, lines: int = _STDERR_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run_compiler(command: Sequence[str], timeout: float | None = None) -> str:
    """Runs a compiler command and returns its stdout.

    Raises KernelCompileError, naming the command and quoting the last lines of its stderr,
    if the program is missing, exits non-zero or runs longer than `timeout` seconds (default
    `COMPILE_TIMEOUT_S`, read at call time).
    """
    if timeout is None:
        timeout = COMPILE_TIMEOUT_S
    shown = shlex.join(command)
    try:
        returncode, stdout, stderr = _communicate(command, timeout)
    except OSError as e:
        raise KernelCompileError(f"cannot run the compiler: {shown}\n{e}") from None
    if returncode is None:
        raise KernelCompileError(
            f"the compiler timed out after {timeout:g} s: {shown}\n{_tail(stderr)}"
        )
    if returncode != 0:
        output = stderr if stderr.strip() else stdout
        raise KernelCompileError(
            f"the compiler failed (exit status {returncode}): {shown}\n{_tail(output)}"
        )
    return stdout


def _kill_group(pid: int) -> None:
    """Kills the process group led by `pid`, which may have exited already."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _communicate(command: Sequence[str], timeout: float) -> tuple[int | None, str, str]:
    """Runs `command` in its own process group and returns (status, stdout, stderr).

    The status is None if the command ran past `timeout` seconds. Then (and on an interrupt)
    the whole group is killed, so no compiler subprocess (cc1plus, ld, ...) outlives the call.
    """
    with subprocess.Popen(
        list(command),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            stdout, stderr = proc.communicate()
            return None, stdout, stderr
        except BaseException:
            _kill_group(proc.pid)
            raise
    return proc.returncode, stdout, stderr


@functools.cache
def compiler_identity(command: tuple[str, ...]) -> str:
    """The output of `<command> --version`, memoized per process and command."""
    return run_compiler([*command, "--version"])


@functools.cache
def cpu_signature() -> str:
    """`platform.machine()` plus the `flags` line of /proc/cpuinfo when there is one."""
    flags = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.partition(":")[2].strip()
                    break
    except OSError:
        pass
    return f"{platform.machine()}\n{flags}"


def kernel_key(source: str, command: tuple[str, ...] | None = None) -> str:
    """The cache key of `source` compiled by `command` (default: `compiler_command()`)."""
    cxx = compiler_command() if command is None else command
    material = {
        "source": source,
        "compiler": compiler_identity(cxx),
        "flags": list(KERNEL_FLAGS),
        "cpu": cpu_signature(),
        "abi": ABI_VERSION,
    }
    blob = json.dumps(material, sort_keys=True, ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()


def kernel_path(key: str) -> Path:
    """Where the library of `key` lives: `cache_dir()/kernels/<key[:2]>/<key>.so`.

    Raises ValueError unless `key` is 64 lowercase hex characters (which also keeps the path
    inside the cache).
    """
    if not _KEY_RE.fullmatch(key):
        raise ValueError(f"a kernel cache key is 64 lowercase hex characters, got {key!r}")
    return cache.cache_dir() / "kernels" / key[:2] / f"{key}.so"


def _compile_into(command: tuple[str, ...], source: str, path: Path) -> None:
    """Compiles `source` and publishes `<path stem>.cc`, the digest of the new library, then
    the library at `path`; the caller holds the lock. The source goes first so that an existing
    `.so` always has its `.cc` beside it, the digest before the library so that a library is
    never in place without it (a `.so` whose digest is missing or wrong is compiled again)."""
    with leftovers.scratch_dir() as scratch:  # the compiler never writes into the cache
        cc, so = scratch / "kernel.cc", scratch / "kernel.so"
        cc.write_text(source, encoding="utf-8")
        run_compiler([*command, *KERNEL_FLAGS, "-o", str(so), str(cc)])
        cache.copy_in(cc, path.with_suffix(".cc"))
        integrity.record(path, integrity.sha256_of(so))
        cache.copy_in(so, path)


def _ensure_compiled(command: tuple[str, ...], source: str, key: str) -> Path:
    path = kernel_path(key)
    if not integrity.intact(path):
        with cache.locked(path):
            if not integrity.intact(path, warn=False):  # Not rebuilt while we waited.
                _compile_into(command, source, path)
    return path


def compile_kernel(source: str) -> CompiledKernel:
    """Returns the compiled library of `source`, compiling it only if it is not in the cache
    (or the cached one does not match its recorded digest).

    Safe to call from several threads and processes at once: builders of the same key wait
    for each other and the compiler runs once. A cache that cannot be written is replaced by a
    temporary one for the rest of the process, with a warning. Raises KernelCompileError on
    failure.
    """
    command = compiler_command()
    key = kernel_key(source, command)
    leftovers.sweep_once(cache.cache_dir())
    try:
        path = _ensure_compiled(command, source, key)
    except OSError as e:  # the cache cannot be written: read-only, not a directory, full
        cache.use_temporary_cache(e)
        path = _ensure_compiled(command, source, key)
    return CompiledKernel(key=key, path=path)


def check_loadable(path: Path) -> None:
    """Loads a compiled kernel library the way the op will (dlopen) and checks its ABI version;
    raises KernelCompileError saying why it cannot be used."""
    import ctypes

    try:
        lib = ctypes.CDLL(str(path), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        version = lib.ts_abi_version()
        lib.ts_run  # noqa: B018 - resolving the symbol is the check
    except (OSError, AttributeError) as e:
        raise KernelCompileError(f"the compiled kernel {path} does not load: {e}") from None
    if version != ABI_VERSION:
        raise KernelCompileError(f"{path} has kernel ABI {version}, the op expects {ABI_VERSION}")
