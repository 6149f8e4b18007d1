"""Records and profile copies on a `tf.io.gfile` filesystem that is not local (`ram://`)."""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from tf_stitch.characterize import storage
from tf_stitch.profiler.store.profile import Profile

RECORDED = Path(__file__).resolve().parents[1] / "profiler" / "fixtures" / "recorded"


def test_records_round_trip_on_a_remote_filesystem() -> None:
    logdir = "ram://characterize_test/logdir"
    storage.write_record(logdir, {"model": "pkg.mod:fn", "status": "ok", "runs": {"1": "r"}})
    storage.write_record(logdir, {"model": "b", "status": "failed"})
    assert storage.read_record(logdir, "pkg.mod:fn")["runs"] == {"1": "r"}
    assert [r["model"] for r in storage.read_records(logdir)] == ["b", "pkg.mod:fn"]
    assert storage.read_record(logdir, "missing") is None
    leftovers = [
        n for n in tf.io.gfile.listdir(storage.join(logdir, storage.RECORDS)) if ".tmp-" in n
    ]
    assert leftovers == []


def test_profiles_copied_up_and_down(tmp_path: Path) -> None:
    remote = "ram://characterize_test/shared"
    storage.copy_tree(str(RECORDED), remote)
    local = storage.local_profiles(remote, ["small_cnn"], tmp_path)
    p = Profile.load(local, "small_cnn")
    assert p.meta["model"] == "small_cnn" and not p.ops.empty
    assert storage.local_profiles(str(RECORDED), ["small_cnn"], tmp_path) == str(RECORDED)


def test_safe_names() -> None:
    assert storage.safe_name("tests.zoo:tiny model") == "tests.zoo_tiny_model"
