"""Which part of the zoo this machine runs: `--shard I/N`, or `--shard auto` from the scheduler
that started it.

`auto` reads, in this order (the first scheduler whose variables are set wins):

- a Kubernetes Indexed Job: `JOB_COMPLETION_INDEX` (0-based, set by Kubernetes) and
  `JOB_COMPLETIONS`, the Job's `completions` (Kubernetes does not pass the count to the pod: the
  manifest sets it, as the README's does);
- a Slurm job array: `SLURM_ARRAY_TASK_ID` of `SLURM_ARRAY_TASK_COUNT` tasks, counted from
  `SLURM_ARRAY_TASK_MIN` in steps of `SLURM_ARRAY_TASK_STEP` (`--array=1-4` and `--array=0-6:2`
  alike);
- torchrun and other launchers in its style: `RANK` (0-based) of `WORLD_SIZE`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

Shard = tuple[int, int]  # (I, N): the I-th (1-based) of N parts


def parse_shard(text: str, env: Mapping[str, str] | None = None) -> Shard:
    """`"2/4"` -> (2, 4); `"auto"` -> the scheduler's (see the module); ValueError unless
    1 <= I <= N, or for `auto` where no scheduler's variables are set."""
    if text == "auto":
        return shard_from_environment(os.environ if env is None else env)
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(
            f"--shard must look like I/N (e.g. 1/4) or be auto, got {text!r}"
        ) from None
    if not 1 <= i <= n:
        raise ValueError(f"--shard {text}: need 1 <= I <= N")
    return i, n


def shard_from_environment(env: Mapping[str, str]) -> Shard:
    """The shard the scheduler's variables in `env` name (see the module)."""
    if "JOB_COMPLETION_INDEX" in env:
        if "JOB_COMPLETIONS" not in env:
            raise ValueError(
                "--shard auto: JOB_COMPLETION_INDEX is set (a Kubernetes Indexed Job) but not "
                "JOB_COMPLETIONS: set it to the Job's completions in the manifest's env"
            )
        index = _int(env, "JOB_COMPLETION_INDEX")
        return _checked(index + 1, _int(env, "JOB_COMPLETIONS"), "Kubernetes")
    if "SLURM_ARRAY_TASK_ID" in env:
        task = _int(env, "SLURM_ARRAY_TASK_ID")
        first = _int(env, "SLURM_ARRAY_TASK_MIN", 0)
        step = _int(env, "SLURM_ARRAY_TASK_STEP", 1)
        if "SLURM_ARRAY_TASK_COUNT" not in env:
            raise ValueError("--shard auto: SLURM_ARRAY_TASK_ID is set but not the task count")
        if step < 1 or (task - first) % step:
            raise ValueError(f"--shard auto: Slurm task {task} is not on its array's steps")
        return _checked((task - first) // step + 1, _int(env, "SLURM_ARRAY_TASK_COUNT"), "Slurm")
    if "RANK" in env and "WORLD_SIZE" in env:
        return _checked(_int(env, "RANK") + 1, _int(env, "WORLD_SIZE"), "RANK/WORLD_SIZE")
    raise ValueError(
        "--shard auto: none of the schedulers' variables is set (JOB_COMPLETION_INDEX and "
        "JOB_COMPLETIONS, SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT, RANK and WORLD_SIZE); "
        "give --shard I/N"
    )


def _int(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    value = env.get(name)
    if value is None and default is not None:
        return default
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValueError(f"--shard auto: {name}={value!r} is not an integer") from None


def _checked(i: int, n: int, source: str) -> Shard:
    if not 1 <= i <= n:
        raise ValueError(f"--shard auto: {source} gives part {i} of {n}, outside 1..{n}")
    return i, n
