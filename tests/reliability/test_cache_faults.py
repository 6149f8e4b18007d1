"""Faults of the kernel cache: an entry corrupted or truncated after it was written is detected
by its sha256 and compiled again; a cache that cannot be written is replaced by a temporary one
for the process, with a warning. Either way the kernels still run and give the right values."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tf_stitch
from tests.runtime.test_stitched_kernel_op import ADD_ONE, add_one_attrs, rows
from tf_stitch.runtime import integrity, kernel_compiler, op_library
from tf_stitch.runtime.kernel_compiler import compile_kernel


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    calls: list[object] = []
    real = kernel_compiler.run_compiler

    def counting(command, timeout=None):  # type: ignore[no-untyped-def]
        if "-o" in command:
            calls.append(command)
        return real(command, timeout)

    monkeypatch.setattr(kernel_compiler, "run_compiler", counting)
    return calls


def source(tag: str) -> str:
    return ADD_ONE + f"// {tag}\n"


def run(key: str, tag: str) -> np.ndarray:
    (y,) = op_library.load().stitched_kernel(
        [rows(2)], **add_one_attrs(key, kernel_name=f"cache_fault_{tag}")
    )
    return y.numpy()


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_entry_is_detected_and_compiled_again(
    kernel_cache: Path, compiles: list[object], damage: str
) -> None:
    first = compile_kernel(source(damage))
    data = bytearray(first.path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
    else:
        del data[len(data) // 3 :]
    first.path.write_bytes(bytes(data))
    with pytest.warns(RuntimeWarning, match="does not match its recorded sha256") as caught:
        again = compile_kernel(source(damage))
    assert len([w for w in caught if "recorded sha256" in str(w.message)]) == 1  # said once
    assert again.path == first.path and len(compiles) == 2
    assert integrity.sha256_of(again.path) == integrity.digest_path(again.path).read_text().strip()
    np.testing.assert_array_equal(run(again.key, damage), rows(2) + 1)


def test_an_entry_without_digest_is_compiled_again(
    kernel_cache: Path, compiles: list[object]
) -> None:
    first = compile_kernel(source("no_digest"))
    integrity.digest_path(first.path).unlink()  # a build cut short, or a file put there
    again = compile_kernel(source("no_digest"))
    assert len(compiles) == 2
    assert integrity.sha256_of(again.path) == integrity.digest_path(again.path).read_text().strip()
    np.testing.assert_array_equal(run(again.key, "no_digest"), rows(2) + 1)


def _swap(a: Path, b: Path, keep_digests: bool) -> None:
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)
    if not keep_digests:
        integrity.digest_path(a).unlink()
        integrity.digest_path(b).unlink()


@pytest.mark.parametrize("keep_digests", [True, False], ids=["digests", "no_digests"])
def test_swapped_libraries_are_never_used(
    kernel_cache: Path, compiles: list[object], keep_digests: bool
) -> None:
    # Two kernels of one signature (x + 1 and x + 2), never loaded in this process before.
    tag = f"swap_{keep_digests}"
    one = compile_kernel(source(tag))
    two = compile_kernel(source(tag).replace("+ 1.0f", "+ 2.0f"))
    _swap(one.path, two.path, keep_digests)
    # The op refuses them and says how to mend the cache ...
    with pytest.raises(tf.errors.FailedPreconditionError, match=r"sha256.*ensure_compiled"):
        run(one.key, tag)
    # ... and compiling (what optimize and ensure_compiled do) builds them again.
    if keep_digests:
        with pytest.warns(RuntimeWarning, match="does not match its recorded sha256"):
            again = compile_kernel(source(tag))
    else:
        again = compile_kernel(source(tag))
    assert again.path == one.path and len(compiles) == 3
    np.testing.assert_array_equal(run(again.key, f"{tag}_again"), rows(2) + 1)
    assert integrity.intact(again.path) and not integrity.intact(two.path, warn=False)


# A kernel of another signature (two inputs), swapped in without digests: loading it would read
# an input that is not there. Run in a child process so that a crash fails this test only.
_OTHER_SIGNATURE_SWAP = """
import sys
import numpy as np
import tensorflow as tf
from tests.runtime.test_stitched_kernel_op import ADD_ONE, BIAS_ROWSUM, add_one_attrs, rows
from tf_stitch.runtime import integrity, op_library
from tf_stitch.runtime.kernel_compiler import compile_kernel

one, other = compile_kernel(ADD_ONE + "// other"), compile_kernel(BIAS_ROWSUM + "// other")
one.path.write_bytes(other.path.read_bytes())
integrity.digest_path(one.path).unlink()
try:
    op_library.load().stitched_kernel([rows(2)], **add_one_attrs(one.key, kernel_name="k"))
except tf.errors.FailedPreconditionError as e:
    print("refused:", e.message)
    sys.exit(0)
sys.exit("the swapped library was run")
"""


def test_a_library_of_another_signature_is_refused_not_run(kernel_cache: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _OTHER_SIGNATURE_SWAP],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parents[2],
        env={**os.environ, "TF_STITCH_CACHE_DIR": str(kernel_cache)},
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "refused:" in done.stdout and "no sha256" in done.stdout


def unwritable_cache(tmp_path: Path) -> Path:
    """A cache directory that cannot be created: its parent is a regular file (the tests run as
    root, for whom chmod does not make a directory read-only)."""
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a directory")
    return blocker / "cache"


def test_an_unwritable_cache_falls_back_to_a_temporary_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TF_STITCH_CACHE_DIR", str(unwritable_cache(tmp_path)))
    with pytest.warns(RuntimeWarning, match="cannot be written .*compiled into"):
        compiled = compile_kernel(source("unwritable"))
    fallback = Path(os.environ["TF_STITCH_CACHE_DIR"])
    assert fallback.name.startswith("tf_stitch_cache_") and compiled.path.is_relative_to(fallback)
    np.testing.assert_array_equal(run(compiled.key, "unwritable"), rows(2) + 1)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_cache_falls_back_to_a_temporary_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "ro"
    cache.mkdir(mode=0o555)
    monkeypatch.setenv("TF_STITCH_CACHE_DIR", str(cache))
    with pytest.warns(RuntimeWarning, match="cannot be written"):
        compile_kernel(source("read_only"))


def test_optimize_with_an_unwritable_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_STITCH_CACHE_DIR", str(unwritable_cache(tmp_path)))
    fn = tf.function(lambda x: tf.nn.softmax(x * 1.5) + 0.25).get_concrete_function(
        tf.TensorSpec([None, 7], tf.float32)
    )
    with pytest.warns(RuntimeWarning, match="cannot be written"):
        optimized = tf_stitch.optimize(fn)
    assert optimized.kernels
    x = tf.random.stateless_normal([3, 7], [5, 6])
    np.testing.assert_allclose(optimized(x).numpy(), fn(x).numpy(), rtol=1e-5, atol=1e-6)
