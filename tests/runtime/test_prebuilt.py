"""The op library built at install time (setup.py -> prebuilt.build_into) and its stamp: it is
used only when built from this op source, for this TensorFlow and machine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tf_stitch.runtime import op_library, prebuilt


def test_the_install_carries_the_op_library_and_this_process_loaded_it() -> None:
    path = prebuilt.packaged_library()
    assert path is not None, "pip install did not build tf_stitch/runtime/_ops (see setup.py)"
    assert op_library.load() is not None
    assert op_library.loaded_path() == path


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    src = prebuilt.PACKAGED_DIR
    if prebuilt.packaged_library() is None:
        pytest.skip("no packaged op library")
    for name in (prebuilt.LIBRARY_NAME, prebuilt.STAMP_NAME):
        shutil.copy(src / name, tmp_path / name)
    return tmp_path


def edit_stamp(directory: Path, **changes: str) -> None:
    stamp = directory / prebuilt.STAMP_NAME
    stamp.write_text(json.dumps({**json.loads(stamp.read_text()), **changes}))


def test_a_matching_stamp(copy: Path) -> None:
    assert prebuilt.packaged_library(copy) == copy / prebuilt.LIBRARY_NAME


@pytest.mark.parametrize(
    "change",
    [{"tensorflow": "2.20.0"}, {"source_sha256": "0" * 64}, {"machine": "riscv64"}],
)
def test_a_stamp_for_something_else_is_ignored(copy: Path, change: dict[str, str]) -> None:
    edit_stamp(copy, **change)
    assert prebuilt.packaged_library(copy) is None


def test_a_missing_or_broken_stamp_or_library_is_ignored(copy: Path) -> None:
    (copy / prebuilt.STAMP_NAME).write_text("{not json")
    assert prebuilt.packaged_library(copy) is None
    (copy / prebuilt.STAMP_NAME).unlink()
    assert prebuilt.packaged_library(copy) is None
    assert prebuilt.packaged_library(copy / "nowhere") is None


def test_the_stamp_covers_the_op_source() -> None:
    assert prebuilt.identity()["source_sha256"] == prebuilt.source_digest()
    assert "kOpLibraryVersion" in prebuilt.source_text()
