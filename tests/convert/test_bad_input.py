"""Bad input to the converter: a clear ConversionError, and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf

import tf_stitch
from tf_stitch.cli import main
from tf_stitch.runtime.cache import replace_dir


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing", "is not a SavedModel directory: it is missing"),
        (lambda d: (d / "file.pb").write_bytes(b"x") and d / "file.pb", "it is a file"),
        (lambda d: (d / "empty").mkdir() or d / "empty", "has no saved_model.pb"),
    ],
)
def test_not_a_saved_model(tmp_path: Path, make, message: str) -> None:
    path = make(tmp_path)
    before = listing(tmp_path)
    with pytest.raises(tf_stitch.ConversionError, match=message):
        tf_stitch.convert_saved_model(path, tmp_path / "out")
    assert listing(tmp_path) == before


def test_a_corrupt_saved_model(tmp_path: Path) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "saved_model.pb").write_bytes(b"\x08\x01garbage")
    with pytest.raises(tf_stitch.ConversionError, match="cannot load the SavedModel"):
        tf_stitch.Converter(tmp_path / "bad")


@pytest.mark.parametrize("damage", ["truncate", "empty"])
def test_a_truncated_variables_file(
    module_dir: Path, tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(module_dir, broken)
    (data,) = (broken / "variables").glob("variables.data-*")
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2 if damage == "truncate" else 0])
    with pytest.raises(tf_stitch.ConversionError, match=r"cannot load the SavedModel .*complete"):
        tf_stitch.Converter(broken)
    before = listing(tmp_path)
    assert main(["convert", str(broken), str(tmp_path / "out")]) == 2
    assert "cannot load the SavedModel" in capsys.readouterr().err
    assert listing(tmp_path) == before


def test_missing_signature(module_dir: Path) -> None:
    with pytest.raises(tf_stitch.ConversionError, match="no signature 'nope'; it has"):
        tf_stitch.Converter(module_dir, signature_keys=["nope"])


def test_input_shape_for_an_unknown_input(module_dir: Path) -> None:
    with pytest.raises(tf_stitch.ConversionError, match="'y', which is not an input"):
        tf_stitch.Converter(module_dir, input_shapes={"y": [1, 16]})


def test_input_shape_that_does_not_fit(module_dir: Path) -> None:
    with pytest.raises(tf_stitch.ConversionError, match="does not fit the input's declared"):
        tf_stitch.Converter(module_dir, input_shapes={"x": [1, 15]})


def test_bad_targets(module_dir: Path) -> None:
    with pytest.raises(tf_stitch.ConversionError, match="targets are 'cpu'"):
        tf_stitch.Converter(module_dir, targets=["tpu"])


def test_output_that_exists_and_is_not_empty(module_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(tf_stitch.ConversionError, match="exists and is not empty"):
        tf_stitch.convert_saved_model(module_dir, out)
    assert listing(tmp_path) == ["out", "out/keep.txt"]
    assert main(["convert", str(module_dir), str(out)]) == 2
    assert (out / "keep.txt").read_text() == "mine"


def test_output_is_the_input(module_dir: Path) -> None:
    converter = tf_stitch.Converter(module_dir, signature_keys="softmax", targets=["cpu"])
    converter.convert()
    with pytest.raises(tf_stitch.ConversionError, match="exists and is not empty"):
        converter.save(module_dir)


def test_save_before_convert(module_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(tf_stitch.ConversionError, match=r"call convert\(\) before save"):
        tf_stitch.Converter(module_dir).save(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_failed_save_leaves_nothing(
    module_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    converter = tf_stitch.Converter(module_dir, signature_keys="softmax", targets=["cpu"])
    converter.convert()
    real_save = tf.saved_model.save

    def save_then_fail(obj, path, **kw):
        real_save(obj, path, **kw)  # a complete SavedModel in the staging directory...
        raise OSError("disk full")  # ...and then the failure

    monkeypatch.setattr(tf.saved_model, "save", save_then_fail)
    with pytest.raises(OSError, match="disk full"):
        converter.save(tmp_path / "out")
    assert listing(tmp_path) == []
    # With overwrite, the old directory survives a failure.
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.txt").write_text("old")
    with pytest.raises(OSError, match="disk full"):
        converter.save(tmp_path / "out", overwrite=True)
    assert listing(tmp_path) == ["out", "out/old.txt"]


def test_replace_dir_restores_the_old_directory_when_the_rename_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    final = tmp_path / "out"
    final.mkdir()
    (final / "old.txt").write_text("old")
    real_rename = Path.rename

    def rename(self: Path, target):
        if self.name.startswith(".out.partial-"):
            raise OSError("rename failed")
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    with pytest.raises(OSError, match="rename failed"):
        replace_dir(final, lambda d: (d / "new.txt").write_text("new"))
    assert listing(tmp_path) == ["out", "out/old.txt"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input-shape", "x"], "takes NAME=D1,D2"),
        (["--input-shape", "x=1,a"], "is not a size"),
        (["--input-shape", "nope=1,16"], "not an input"),
        (["--signature", "nope"], "no signature 'nope'"),
        (["--targets", "gpu"], "targets are 'cpu'"),
    ],
)
def test_cli_errors(
    module_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args, message: str
) -> None:
    assert main(["convert", str(module_dir), str(tmp_path / "out"), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
