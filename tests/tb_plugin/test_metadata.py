"""tb_plugin/metadata.py owns the names the profiler writes and the tab reads: a run name the
profiler accepts is one the tab opens, and the other way round."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tb_plugin import metadata
from tb_plugin.store import BadRequest, check_name
from tf_stitch.profiler.store import profile
from tf_stitch.profiler.trace import spans

NAMES = ["resnet50", "bert base (optimized)", "résumé", "a" * 255, "a..b", "..", ".", ""]
NAMES += ["a/b", "a\\b", "a\x00b", "C:model", "c:", "/abs", "a" * 256]


def _tab_opens(name: str) -> bool:
    try:
        check_name(name)
    except BadRequest:
        return False
    return True


def _profiler_writes(name: str) -> bool:
    try:
        profile.check_run_name(name)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("name", NAMES)
def test_the_profiler_and_the_tab_agree_on_every_run_name(name: str) -> None:
    assert _profiler_writes(name) == _tab_opens(name) == (not metadata.run_name_problem(name))


def test_a_drive_and_a_long_name_are_refused_with_the_reason() -> None:
    # The profiler used to accept both, and the tab then could not open the run.
    with pytest.raises(ValueError, match="name a drive"):
        profile.check_run_name("C:model")
    with pytest.raises(ValueError, match="longer than 255 characters"):
        profile.check_run_name("a" * 256)


def test_the_profiler_writes_the_files_and_levels_the_tab_reads() -> None:
    assert spans.LEVELS == metadata.LEVELS
    assert profile.STORE_DIR.as_posix() == metadata.PROFILES_DIR
    written = {profile.SPANS_FILE, profile.META_FILE, profile.KERNELS_FILE, profile.OPS_FILE}
    assert written == {
        metadata.PROFILE_SPANS,
        metadata.PROFILE_META,
        metadata.PROFILE_KERNELS,
        metadata.PROFILE_OPS,
    }


RECORDED = Path(__file__).parents[1] / "profiler/fixtures/recorded/plugins/tf_stitch/small_cnn"


def test_a_profile_s_meta_has_only_the_keys_the_tab_declares() -> None:
    """`ProfileMeta` lists what a profile's meta.json holds (mypy checks the profiler's writes
    against it); a recorded profile has those keys only, and its overheads those of a level."""
    recorded = json.loads((RECORDED / metadata.PROFILE_META).read_text())
    assert set(recorded) <= set(metadata.ProfileMeta.__annotations__)
    for overhead in recorded["overheads"].values():
        assert set(overhead) <= set(metadata.LevelOverhead.__annotations__)
    assert {"model", "levels", "model_latency_ns", "overheads"} <= set(recorded)
