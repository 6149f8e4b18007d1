"""`tf-stitch characterize` argument errors: refused before anything runs, exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tf_stitch.cli import main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shard", "3/2"], "need 1 <= I <= N"),
        (["--shard", "half"], "must look like I/N"),
        (["--models", "lenet5,resnet9000"], "unknown model 'resnet9000'"),
        (["--batch-sizes", "1,0"], "batch sizes must be positive"),
        (["--jobs", "0"], "need jobs >= 1"),
        (["--shard", "auto"], "none of the schedulers' variables is set"),
        (["--report-only", "--no-report"], "contradict each other"),
    ],
)
def test_bad_arguments(
    args: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    logdir = tmp_path / "logdir"
    assert main(["characterize", "--logdir", str(logdir), *args]) == 2
    assert message in capsys.readouterr().err
    assert not logdir.exists()
