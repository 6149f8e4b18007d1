"""characterize/shards.py: `--shard I/N`, and `--shard auto` from a Kubernetes Indexed Job, a
Slurm array or RANK/WORLD_SIZE; the README's Job manifest and sbatch line, parsed and run."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from tf_stitch.characterize.campaign import select_models
from tf_stitch.characterize.shards import parse_shard, shard_from_environment
from tf_stitch.cli import parser

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.parametrize(
    ("env", "shard"),
    [
        ({"JOB_COMPLETION_INDEX": "0", "JOB_COMPLETIONS": "4"}, (1, 4)),
        ({"JOB_COMPLETION_INDEX": "3", "JOB_COMPLETIONS": "4"}, (4, 4)),
        (
            {
                "SLURM_ARRAY_TASK_ID": "1",
                "SLURM_ARRAY_TASK_COUNT": "4",
                "SLURM_ARRAY_TASK_MIN": "1",
            },
            (1, 4),
        ),
        (
            {
                "SLURM_ARRAY_TASK_ID": "4",
                "SLURM_ARRAY_TASK_COUNT": "4",
                "SLURM_ARRAY_TASK_MIN": "1",
            },
            (4, 4),
        ),
        # --array=0-6:2: tasks 0, 2, 4, 6
        (
            {
                "SLURM_ARRAY_TASK_ID": "4",
                "SLURM_ARRAY_TASK_COUNT": "4",
                "SLURM_ARRAY_TASK_MIN": "0",
                "SLURM_ARRAY_TASK_STEP": "2",
            },
            (3, 4),
        ),
        ({"RANK": "2", "WORLD_SIZE": "3"}, (3, 3)),
        # the first scheduler wins: a torchrun inside a Slurm task
        (
            {
                "SLURM_ARRAY_TASK_ID": "2",
                "SLURM_ARRAY_TASK_COUNT": "2",
                "SLURM_ARRAY_TASK_MIN": "1",
                "RANK": "0",
                "WORLD_SIZE": "8",
            },
            (2, 2),
        ),
    ],
)
def test_auto_reads_the_scheduler_s_variables(env: dict[str, str], shard: tuple[int, int]) -> None:
    assert shard_from_environment(env) == shard
    assert parse_shard("auto", env) == shard


@pytest.mark.parametrize(
    ("env", "error"),
    [
        ({}, "none of the schedulers' variables"),
        ({"JOB_COMPLETION_INDEX": "1"}, "set it to the Job's completions"),
        ({"JOB_COMPLETION_INDEX": "4", "JOB_COMPLETIONS": "4"}, "part 5 of 4"),
        ({"JOB_COMPLETION_INDEX": "one", "JOB_COMPLETIONS": "4"}, "is not an integer"),
        ({"SLURM_ARRAY_TASK_ID": "3"}, "not the task count"),
        (
            {
                "SLURM_ARRAY_TASK_ID": "3",
                "SLURM_ARRAY_TASK_COUNT": "4",
                "SLURM_ARRAY_TASK_STEP": "2",
            },
            "not on its array's steps",
        ),
        ({"RANK": "-1", "WORLD_SIZE": "2"}, "outside 1..2"),
    ],
)
def test_auto_says_what_is_missing_or_wrong(env: dict[str, str], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_shard("auto", env)


def test_an_explicit_shard_ignores_the_environment() -> None:
    assert parse_shard("2/3", {"RANK": "0", "WORLD_SIZE": "8"}) == (2, 3)


def _block(language: str, containing: str) -> str:
    blocks = re.findall(rf"```{language}\n(.*?)```", README.read_text(), re.S)
    (block,) = [b for b in blocks if containing in b]
    return block


def _characterize_args(argv: list[str]) -> object:
    assert argv[:2] == ["tf-stitch", "characterize"]
    return parser().parse_args(argv[1:])


def test_the_readme_s_indexed_job_splits_the_zoo_among_its_pods() -> None:
    job = yaml.safe_load(_block("yaml", "kind: Job"))
    spec = job["spec"]
    assert job["kind"] == "Job" and spec["completionMode"] == "Indexed"
    (container,) = spec["template"]["spec"]["containers"]
    args = _characterize_args(container["command"])
    assert args.shard == "auto" and args.no_report  # type: ignore[attr-defined]
    env = {e["name"]: e["value"] for e in container["env"]}
    pods = [{**env, "JOB_COMPLETION_INDEX": str(i)} for i in range(spec["completions"])]
    parts = [select_models("all", parse_shard("auto", pod)) for pod in pods]
    everything = select_models("all")
    assert sorted(m for part in parts for m in part) == sorted(everything)


def test_the_readme_s_sbatch_line_splits_the_zoo_among_its_tasks() -> None:
    line = next(x for x in _block("sh", "sbatch").splitlines() if x.startswith("sbatch"))
    argv = shlex.split(line)
    array = re.fullmatch(r"--array=(\d+)-(\d+)", argv[1])
    assert array is not None
    first, last = int(array.group(1)), int(array.group(2))
    args = _characterize_args(shlex.split(argv[argv.index("--wrap") + 1]))
    assert args.shard == "auto"  # type: ignore[attr-defined]
    tasks = [
        {
            "SLURM_ARRAY_TASK_ID": str(t),
            "SLURM_ARRAY_TASK_MIN": str(first),
            "SLURM_ARRAY_TASK_COUNT": str(last - first + 1),
        }
        for t in range(first, last + 1)
    ]
    parts = [select_models("all", parse_shard("auto", t)) for t in tasks]
    assert sorted(m for part in parts for m in part) == sorted(select_models("all"))
    assert all(parts)
