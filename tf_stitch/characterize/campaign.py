"""`tf-stitch characterize`: profile a zoo of models, each in its own process, into one logdir,
then write the report.

A model that raises, crashes or runs out of memory is recorded as failed and the campaign goes
on; a model whose record says `ok` (for the batch sizes asked) is skipped, so an interrupted
campaign resumes where it stopped (a model profiled before without tf_stitch gets only its
tf_stitch part); `shard=(i, n)` takes every n-th model from the i-th (1-based),
so n machines can split the zoo while writing to one shared logdir (any `tf.io.gfile` path;
shards.py reads the part from a scheduler's variables).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, TextIO

from tf_stitch.characterize import storage
from tf_stitch.characterize.shards import Shard
from tf_stitch.progress import Progress

DEFAULT_BATCH_SIZES = (1, 8, 32)
TIMEOUT_S = 3600.0  # one model's whole run (build, profiles, optimize)


def select_models(models: str | list[str], shard: Shard = (1, 1)) -> list[str]:
    """The models to run: "all" (the whole zoo, in its order) or names/`module:function` specs,
    then this shard's part of them."""
    from tf_stitch import zoo

    names = list(zoo.zoo()) if models == "all" else list(models)
    for name in names:
        if not zoo.is_custom(name):
            zoo.get(name)  # ValueError for an unknown name, before anything runs
    if not names:
        raise ValueError("no models to characterize")
    i, n = shard
    return names[i - 1 :: n]


def _done(record: dict[str, Any] | None, batch_sizes: list[int], optimize: bool) -> bool:
    """Whether a model's record already holds what is asked: its profiles at these batch sizes
    and, with `optimize`, the tf_stitch part (a profile, or the error that stopped it)."""
    return bool(
        record
        and record.get("status") == "ok"
        and set(batch_sizes) <= {int(b) for b in record.get("runs", {})}
        and (not optimize or "stitched_run" in record or "optimize_error" in record)
    )


def _run_worker(model: str, args: dict[str, Any], logdir: str, timeout: float) -> dict[str, Any]:
    """Runs one model's worker process; a crash or a timeout becomes a failed record."""
    payload = json.dumps({"spec": model, "logdir": logdir, **args})
    with tempfile.TemporaryFile("w+") as log:
        started = time.time()
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "tf_stitch.characterize.worker", payload],
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                check=False,
            )
            rc: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            rc = None
        log.seek(0)
        text = log.read()
    storage.write_text(storage.join(logdir, storage.LOGS, f"{storage.safe_name(model)}.log"), text)
    record = storage.read_record(logdir, model)
    if record is not None and record.get("started", "") >= _iso(started - 1):
        return record
    why = (
        f"timed out after {timeout:.0f} s"
        if rc is None
        else f"the worker process died (exit code {rc}"
        + (", killed: out of memory?" if rc in (-9, 137) else "")
        + ")"
    )
    record = {
        "model": model,
        "status": "failed",
        "stage": "process",
        "error": why,
        "log_tail": text[-3000:],
        "wall_s": time.time() - started,
        "batch_sizes": args["batch_sizes"],
        "runs": {},
        "started": _iso(started),
    }
    storage.write_record(logdir, record)
    return record


def _iso(t: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(t, datetime.UTC).isoformat(timespec="seconds")


def characterize(
    models: str | list[str] = "all",
    *,
    batch_sizes: tuple[int, ...] | list[int] = DEFAULT_BATCH_SIZES,
    logdir: str = "tf_stitch_characterize/logdir",
    report: str | None = "tf_stitch_characterize/report",
    shard: Shard = (1, 1),
    jobs: int = 1,
    steps: int = 10,
    warmup: int = 3,
    optimize: bool = True,
    otlp_endpoint: str | None = None,
    timeout: float = TIMEOUT_S,
    progress: TextIO = sys.stderr,
) -> dict[str, Any]:
    """Runs the campaign (see the module doc) and writes the report; returns
    {"ran", "skipped", "failed", "report"}."""
    batches = [int(b) for b in batch_sizes]
    if not batches or min(batches) < 1:
        raise ValueError("batch sizes must be positive integers")
    if jobs < 1 or steps < 2:
        raise ValueError("need jobs >= 1 and steps >= 2")
    names = select_models(models, shard)
    todo = [m for m in names if not _done(storage.read_record(logdir, m), batches, optimize)]
    skipped = [m for m in names if m not in todo]
    args = dict(
        batch_sizes=batches,
        steps=steps,
        warmup=warmup,
        optimize=optimize,
        otlp_endpoint=otlp_endpoint,
    )
    if skipped:
        print(f"characterize: {len(skipped)} models already done, skipped", file=progress)
    bar = Progress(max(len(todo), 1), progress, "characterize")
    failed: list[str] = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        running: dict[Future[dict[str, Any]], str] = {}
        queue = list(todo)
        done = 0
        while queue or running:
            while queue and len(running) < jobs:
                model = queue.pop(0)
                running[pool.submit(_run_worker, model, args, logdir, timeout)] = model
            bar.update(done, f"running {', '.join(running.values())}")
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                model = running.pop(future)
                record = future.result()
                done += 1
                if record["status"] != "ok":
                    failed.append(model)
                    print(
                        f"characterize: {model} failed ({record.get('stage')}): "
                        f"{str(record.get('error', ''))[:200]}",
                        file=progress,
                    )
    bar.update(bar.total, "done")
    written = None
    if report:
        from tf_stitch.characterize.report import write_report

        written = str(write_report(logdir, Path(report)))
        print(f"characterize: report in {written}/index.html", file=progress)
    return {"ran": todo, "skipped": skipped, "failed": failed, "report": written}
