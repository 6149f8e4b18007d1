"""The op library keeps its own copies of two rules the Python side owns, because a process
without tf_stitch (TensorFlow Serving) loads the op too: where the kernel cache is and what
this machine is. Both sides are asked here, through the op's C functions, and must agree."""

from __future__ import annotations

import ctypes
import itertools
import platform

import pytest

from tf_stitch.runtime import cache, kernel_compiler, op_library


def _ask(function: str) -> str:
    op_library.load()
    fn = getattr(ctypes.CDLL(str(op_library.loaded_path())), function)
    fn.argtypes, fn.restype = [ctypes.c_char_p, ctypes.c_int64], ctypes.c_int64
    out = ctypes.create_string_buffer(4096)
    length = fn(out, len(out))
    assert 0 < length < len(out)
    return out.value.decode()


SETTINGS = [None, "", "/tmp/tf_stitch rules/explicit"]


@pytest.mark.parametrize(
    ("explicit", "xdg", "home"),
    itertools.product(SETTINGS, [None, "", "/tmp/xdg"], [None, "", "/tmp/home"]),
)
def test_both_sides_find_the_same_cache_directory(
    monkeypatch: pytest.MonkeyPatch, explicit: str | None, xdg: str | None, home: str | None
) -> None:
    for name, value in (("TF_STITCH_CACHE_DIR", explicit), ("XDG_CACHE_HOME", xdg)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    if home is None:
        monkeypatch.delenv("HOME", raising=False)  # then both read the password database
    else:
        monkeypatch.setenv("HOME", home)
    assert _ask("tf_stitch_cache_dir") == str(cache.cache_dir())


def test_both_sides_describe_this_machine_alike() -> None:
    machine, _, flags = _ask("tf_stitch_cpu_signature").partition("\n")
    python_machine, _, python_flags = kernel_compiler.cpu_signature().partition("\n")
    assert machine == python_machine == platform.machine()
    assert set(flags.split()) == set(python_flags.split())
