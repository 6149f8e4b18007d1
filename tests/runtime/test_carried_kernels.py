"""StitchedKernel nodes that carry their kernel (a converted SavedModel's): the carried binary
is installed into an empty cache when it fits this CPU; otherwise the carried source is
compiled on first use; with neither possible, a clear error."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

from tests.runtime.test_stitched_kernel_op import ADD_ONE, add_one_attrs, rows
from tf_stitch.runtime import op_library
from tf_stitch.runtime.kernel_compiler import compile_kernel, cpu_signature


def built_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tag: str
) -> tuple[str, str, bytes]:
    """ADD_ONE (made distinct by `tag`, so that no earlier kernel object is reused) compiled
    into another cache; then this test's cache is a fresh, empty one."""
    source = ADD_ONE + f"// {tag}\n"
    monkeypatch.setenv("TF_STITCH_CACHE_DIR", str(tmp_path / "elsewhere"))
    compiled = compile_kernel(source)
    binary = compiled.path.read_bytes()
    monkeypatch.setenv("TF_STITCH_CACHE_DIR", str(tmp_path / "here"))
    return compiled.key, source, binary


def run(key: str, source: str, tag: str, **attrs: Any) -> np.ndarray:
    ops = op_library.load()
    (y,) = ops.stitched_kernel(
        [rows(3)], **add_one_attrs(key, source=source, kernel_name=f"add_one_{tag}", **attrs)
    )
    return y.numpy()


def test_a_carried_binary_that_fits_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, source, binary = built_elsewhere(tmp_path, monkeypatch, "fits")
    y = run(key, source, "fits", binary=binary, binary_target=cpu_signature())
    np.testing.assert_array_equal(y, rows(3) + 1)
    here = tmp_path / "here" / "kernels" / key[:2]
    assert (here / f"{key}.so").read_bytes() == binary
    assert (here / f"{key}.cc").read_text() == source


def other_cpu() -> str:
    return f"{platform.machine()}\n{cpu_signature().split(chr(10), 1)[1]} avx9000"


def test_a_binary_for_another_cpu_is_compiled_from_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, source, binary = built_elsewhere(tmp_path, monkeypatch, "other_cpu")
    y = run(key, source, "other_cpu", binary=binary, binary_target=other_cpu())
    np.testing.assert_array_equal(y, rows(3) + 1)
    assert list((tmp_path / "here" / "kernels").glob("*/*.so"))  # compiled here


def test_a_corrupt_binary_is_compiled_from_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, source, _ = built_elsewhere(tmp_path, monkeypatch, "corrupt")
    y = run(key, source, "corrupt", binary=b"\x7fELF but not really", binary_target=cpu_signature())
    np.testing.assert_array_equal(y, rows(3) + 1)


def test_no_fitting_binary_and_no_compiler_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, source, binary = built_elsewhere(tmp_path, monkeypatch, "no_compiler")
    monkeypatch.setenv("TF_STITCH_CXX", str(tmp_path / "no" / "c++"))
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        run(key, source, "no_compiler", binary=binary, binary_target=other_cpu())
    message = str(info.value)
    assert "cannot load its kernel: it is not in the cache" in message
    assert "this CPU lacks avx9000" in message
    assert "no C++ compiler" in message and "TF_STITCH_CXX" in message
    assert not list((tmp_path / "here").glob("kernels/*/*.so"))
