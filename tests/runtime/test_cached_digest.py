"""The op checks a cached kernel library against the sha256 recorded beside it before loading
it (the libraries a converted SavedModel's nodes name are loaded by the op, not by Python): a
library that was replaced or damaged but still loads is never run."""

from __future__ import annotations

import ctypes
import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tests.runtime.test_carried_kernels import built_elsewhere, run
from tests.runtime.test_stitched_kernel_op import ADD_ONE, rows
from tf_stitch.runtime import op_library
from tf_stitch.runtime.kernel_compiler import compile_kernel, cpu_signature


def op_sha256(path: Path) -> str:
    op_library.load()
    out = ctypes.create_string_buffer(65)
    library = ctypes.CDLL(str(op_library.loaded_path()))
    assert library.tf_stitch_sha256_file(str(path).encode(), out) == 0
    return out.value.decode()


@pytest.mark.parametrize("size", [0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 100_003])
def test_the_ops_sha256_is_sha256(tmp_path: Path, size: int) -> None:
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    path = tmp_path / "data"
    path.write_bytes(data)
    assert op_sha256(path) == hashlib.sha256(data).hexdigest()


def add_two_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, here: str) -> Path:
    """A loadable kernel library with ADD_ONE's interface that adds 2."""
    monkeypatch.setenv("TF_STITCH_CACHE_DIR", str(tmp_path / "other"))
    path = compile_kernel(ADD_ONE.replace("+ 1.0f", "+ 2.0f") + "// add two\n").path
    monkeypatch.setenv("TF_STITCH_CACHE_DIR", here)
    return path


def test_an_installed_binary_gets_its_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, source, binary = built_elsewhere(tmp_path, monkeypatch, "digest")
    run(key, source, "digest", binary=binary, binary_target=cpu_signature())
    recorded = (tmp_path / "here" / "kernels" / key[:2] / f"{key}.sha256").read_text().strip()
    assert recorded == hashlib.sha256(binary).hexdigest()


def test_a_replaced_library_is_not_run_the_carried_binary_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, source, binary = built_elsewhere(tmp_path, monkeypatch, "replaced")
    cached = tmp_path / "here" / "kernels" / key[:2] / f"{key}.so"
    cached.parent.mkdir(parents=True)
    shutil.copy(add_two_library(tmp_path, monkeypatch, str(tmp_path / "here")), cached)
    cached.with_suffix(".sha256").write_text(hashlib.sha256(binary).hexdigest() + "\n")
    y = run(key, source, "replaced", binary=binary, binary_target=cpu_signature())
    np.testing.assert_array_equal(y, rows(3) + 1)  # not + 2
    assert cached.read_bytes() == binary  # the cache entry is mended


def test_a_replaced_library_of_an_optimized_graph_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "here"
    monkeypatch.setenv("TF_STITCH_CACHE_DIR", str(here))
    source = ADD_ONE + "// optimized graph\n"
    compiled = compile_kernel(source)
    shutil.copy(add_two_library(tmp_path, monkeypatch, str(here)), compiled.path)
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        run(compiled.key, source, "optimized_graph")
    message = str(info.value)
    assert "does not match the sha256" in message
    assert "ensure_compiled" in message
