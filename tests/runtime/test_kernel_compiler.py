"""compile_kernel: keys, cache layout, caching, compiler failures and concurrent processes."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tf_stitch.runtime import kernel_compiler
from tf_stitch.runtime.kernel_compiler import (
    CompiledKernel,
    KernelCompileError,
    compile_kernel,
    compiler_command,
    kernel_key,
    kernel_path,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def kernel_source(value: int) -> str:
    """A minimal ABI-conforming kernel whose out[0][i] = value for every unit i."""
    return textwrap.dedent(
        f"""
        #include <cstdint>
        extern "C" int ts_abi_version(void) {{ return 1; }}
        extern "C" int ts_value(void) {{ return {value}; }}
        extern "C" void ts_run(const void* const* in, void* const* out, const int64_t* sym,
                               int64_t begin, int64_t end) {{
          int32_t* y = static_cast<int32_t*>(out[0]);
          for (int64_t i = begin; i < end; ++i) y[i] = {value};
        }}
        """
    )


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh cache, the default compiler and no memoized compiler identity."""
    monkeypatch.setenv("TF_STITCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TF_STITCH_CXX", raising=False)
    monkeypatch.delenv("CXX", raising=False)
    kernel_compiler.compiler_identity.cache_clear()
    yield tmp_path / "cache"
    kernel_compiler.compiler_identity.cache_clear()


def write_script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def counting_compiler(tmp_path: Path, delay_s: float = 0.0) -> tuple[Path, Path]:
    """A wrapper around the real compiler that logs each invocation's arguments."""
    log = tmp_path / "invocations.log"
    real = shutil.which("c++")
    assert real is not None
    script = write_script(
        tmp_path / "counting-cxx",
        f"""\
        echo "$*" >> '{log}'
        case "$*" in *-shared*) sleep {delay_s};; esac
        exec '{real}' "$@"
        """,
    )
    return script, log


def compile_invocations(log: Path) -> list[str]:
    if not log.exists():
        return []
    return [line for line in log.read_text().splitlines() if "-shared" in line]


def load_value(path: Path) -> int:
    lib = ctypes.CDLL(str(path))
    assert lib.ts_abi_version() == kernel_compiler.ABI_VERSION
    return int(lib.ts_value())


# -- keys and layout ---------------------------------------------------------------------------
def test_compile_kernel_layout_and_library(isolated: Path) -> None:
    compiled = compile_kernel(kernel_source(7))
    assert isinstance(compiled, CompiledKernel)
    key = compiled.key
    assert len(key) == 64 and all(c in "0123456789abcdef" for c in key)
    assert compiled.path == isolated / "kernels" / key[:2] / f"{key}.so" == kernel_path(key)
    assert compiled.path.with_suffix(".cc").read_text() == kernel_source(7)
    assert load_value(compiled.path) == 7
    # Only the published files (the library's sha256 too) and the locks remain: no temporaries.
    assert sorted(p.name for p in compiled.path.parent.iterdir()) == [
        f".{key}.sha256.lock",
        f".{key}.so.lock",
        f"{key}.cc",
        f"{key}.sha256",
        f"{key}.so",
    ]


def test_key_is_deterministic_and_covers_the_source() -> None:
    assert kernel_key(kernel_source(1)) == kernel_key(kernel_source(1))
    assert kernel_key(kernel_source(1)) != kernel_key(kernel_source(2))
    assert compile_kernel(kernel_source(1)).key == kernel_key(kernel_source(1))


def test_key_covers_compiler_identity(tmp_path: Path) -> None:
    other = write_script(tmp_path / "other-cxx", "echo 'other compiler 1.0'\n")
    assert kernel_key("x", (str(other),)) != kernel_key("x", ("c++",))


def test_key_covers_flags_and_abi(monkeypatch: pytest.MonkeyPatch) -> None:
    base = kernel_key("x")
    monkeypatch.setattr(kernel_compiler, "KERNEL_FLAGS", (*kernel_compiler.KERNEL_FLAGS, "-g"))
    with_g = kernel_key("x")
    monkeypatch.setattr(kernel_compiler, "ABI_VERSION", 2)
    assert len({base, with_g, kernel_key("x")}) == 3


def test_cpu_signature_names_the_machine() -> None:
    signature = kernel_compiler.cpu_signature()
    assert signature.startswith(os.uname().machine)


@pytest.mark.parametrize("key", ["", "0" * 63, "A" * 64, "../" * 21 + "x", "g" * 64])
def test_kernel_path_rejects_bad_keys(key: str) -> None:
    with pytest.raises(ValueError, match="64 lowercase hex"):
        kernel_path(key)


def test_compiler_command_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    assert compiler_command() == ("c++",)
    monkeypatch.setenv("CXX", "ccache g++")
    assert compiler_command() == ("ccache", "g++")
    monkeypatch.setenv("TF_STITCH_CXX", "/opt/clang++ -fcolor-diagnostics")
    assert compiler_command() == ("/opt/clang++", "-fcolor-diagnostics")


# -- caching -----------------------------------------------------------------------------------
def test_second_call_does_not_invoke_the_compiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, log = counting_compiler(tmp_path)
    monkeypatch.setenv("TF_STITCH_CXX", str(script))
    first = compile_kernel(kernel_source(3))
    assert len(log.read_text().splitlines()) == 2  # --version, then the compilation.
    second = compile_kernel(kernel_source(3))
    assert second == first
    assert len(log.read_text().splitlines()) == 2  # Identity memoized, library cached.
    # A new process (simulated) asks the compiler for its identity again, but only that.
    kernel_compiler.compiler_identity.cache_clear()
    assert compile_kernel(kernel_source(3)) == first
    assert len(compile_invocations(log)) == 1


def test_threads_compiling_the_same_source_compile_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, log = counting_compiler(tmp_path, delay_s=0.3)
    monkeypatch.setenv("TF_STITCH_CXX", str(script))
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: compile_kernel(kernel_source(5)), range(4)))
    assert len(set(results)) == 1
    assert len(compile_invocations(log)) == 1
    assert load_value(results[0].path) == 5


# -- failures ----------------------------------------------------------------------------------
def assert_cache_has_no_kernels(cache: Path) -> None:
    leftovers = [p.name for p in (cache / "kernels").rglob("*") if p.is_file()]
    assert all(name.endswith(".lock") for name in leftovers), leftovers


def test_compiler_that_fails_without_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_STITCH_CXX", "/bin/false")
    with pytest.raises(KernelCompileError, match=r"exit status 1\): /bin/false"):
        compile_kernel(kernel_source(1))


def test_missing_compiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "no-such-compiler"
    monkeypatch.setenv("TF_STITCH_CXX", str(missing))
    with pytest.raises(KernelCompileError, match=f"cannot run the compiler: {missing}"):
        compile_kernel(kernel_source(1))


def test_compiler_error_message_has_command_and_stderr_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated: Path
) -> None:
    script = write_script(
        tmp_path / "broken-cxx",
        """\
        if [ "$1" = --version ]; then echo 'broken-cxx 1.0'; exit 0; fi
        for i in $(seq 1 30); do echo "kernel.cc:$i: error: kaboom $i" >&2; done
        exit 3
        """,
    )
    monkeypatch.setenv("TF_STITCH_CXX", str(script))
    with pytest.raises(KernelCompileError) as info:
        compile_kernel(kernel_source(1))
    message = str(info.value)
    assert f"exit status 3): {script} -O3 -std=c++17 -shared" in message
    assert "-march=native -o " in message
    assert "kaboom 30" in message and "kaboom 11" in message
    assert "kaboom 10\n" not in message  # Only the last 20 lines.
    assert_cache_has_no_kernels(isolated)


def test_invalid_source_raises_with_the_real_compiler_error(isolated: Path) -> None:
    with pytest.raises(KernelCompileError, match=r"(?s)c\+\+ -O3 .*error: .*not_a_type"):
        compile_kernel("not_a_type x;\n")
    assert_cache_has_no_kernels(isolated)


def test_compiler_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated: Path) -> None:
    script = write_script(
        tmp_path / "slow-cxx",
        """\
        if [ "$1" = --version ]; then echo 'slow-cxx 1.0'; exit 0; fi
        echo 'starting' >&2
        sleep 30
        """,
    )
    monkeypatch.setenv("TF_STITCH_CXX", str(script))
    monkeypatch.setattr(kernel_compiler, "COMPILE_TIMEOUT_S", 0.5)
    with pytest.raises(
        KernelCompileError, match=r"timed out after 0.5 s: .*slow-cxx(?s:.*)starting"
    ):
        compile_kernel(kernel_source(1))
    assert_cache_has_no_kernels(isolated)


# -- concurrent processes ----------------------------------------------------------------------
_WORKER = """
import ctypes, sys
from tf_stitch.runtime.kernel_compiler import compile_kernel
for source in sys.argv[1:]:
    compiled = compile_kernel(source)
    lib = ctypes.CDLL(str(compiled.path))
    assert lib.ts_abi_version() == 1
    print(compiled.key, lib.ts_value())
"""


def test_two_processes_compile_into_one_fresh_cache(tmp_path: Path, isolated: Path) -> None:
    # The slow wrapper makes both processes compile the shared source at the same time.
    script, log = counting_compiler(tmp_path, delay_s=0.5)
    env = {**os.environ, "TF_STITCH_CXX": str(script), "PYTHONPATH": str(REPO_ROOT)}
    shared, mine, theirs = kernel_source(10), kernel_source(11), kernel_source(12)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, *sources],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for sources in ((shared, mine), (shared, theirs))
    ]
    outputs = [proc.communicate(timeout=600) for proc in procs]  # slow on a busy machine
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    results = [dict(line.split() for line in out.splitlines()) for out, _ in outputs]
    assert [sorted(r.values()) for r in results] == [["10", "11"], ["10", "12"]]
    assert len(set(results[0]) & set(results[1])) == 1  # The shared source has one key.
    assert len(compile_invocations(log)) == 3  # ... and was compiled once.
    for key, value in {**results[0], **results[1]}.items():
        assert load_value(kernel_path(key)) == int(value)
    assert not [p for p in isolated.rglob("*") if ".tmp" in p.name]
