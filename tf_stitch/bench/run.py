"""`tf-stitch bench`: every workload measured, one table, written as JSON, Markdown and a
TensorBoard run (text summary plus the tf_stitch plugin's data file)."""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
import traceback
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from tb_plugin import metadata
from tf_stitch.bench import report
from tf_stitch.bench.measure import KERNEL_COLUMNS, Measurement, measure_function
from tf_stitch.progress import Progress
from tf_stitch.runtime.cache import atomic_write, replace_dir

JSON_NAME, MARKDOWN_NAME, TENSORBOARD_DIR = "bench.json", "bench.md", "tensorboard"
PLUGIN_FILE = metadata.BENCH_FILE  # under <run>/plugins/tf_stitch/, for the TensorBoard tab
STAGES = 7  # build, optimize, check, count, XLA:GPU x2, timing


def resolve_workloads(names: Sequence[str] | None) -> list[str]:
    """The workload names to run (all by default); ValueError naming the known ones."""
    from tf_stitch.workloads import WORKLOADS

    if not names:
        return list(WORKLOADS)
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise ValueError(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(WORKLOADS)}")
    return list(dict.fromkeys(names))


def _machine() -> dict[str, Any]:
    import tensorflow as tf

    return {
        "host": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
    }


def _record(m: Measurement) -> dict[str, Any]:
    data = asdict(m)
    data["latency_ms"] = {k: asdict(v) for k, v in m.latency.items()}
    del data["latency"]
    return data


def document(
    meta: dict[str, Any], results: dict[str, Measurement], failed: dict[str, str]
) -> dict[str, Any]:
    """The JSON document: settings, machine, per-workload results, failures and summary."""
    return {
        **meta,
        "kernel_columns": KERNEL_COLUMNS,
        "workloads": {name: _record(m) for name, m in results.items()},
        "failed": failed,
        "summary": report.summary(results) if results else {},
    }


def markdown_report(
    meta: dict[str, Any], results: dict[str, Measurement], failed: dict[str, str]
) -> str:
    machine = meta["machine"]
    lines = [
        f"Measured {meta['date']} on {machine['host']} ({machine['cpu']}, {machine['cpus']} CPUs),"
        f" TensorFlow {machine['tensorflow']}; {meta['rounds']} interleaved rounds; XLA:GPU "
        f"compiled for {meta['gpu_target'] or 'no GPU (skipped)'} without a GPU.",
        "",
        "Kernels per step (launches); latency on this CPU in ms, median (min-max); ratios are "
        "tf_stitch's over the column named.",
        "",
        report.markdown(report.rows(results, failed)),
    ]
    if results:
        lines += ["", "Targets:"]
        for target, met in report.summary(results)["targets"].items():
            lines.append(f"- {target}: {report.verdict(met)}")
    return "\n".join(lines) + "\n"


def write_tensorboard_run(out: Path, run: str, doc: dict[str, Any], table: str) -> Path:
    """A TensorBoard run `out/tensorboard/<run>`: the table as a text summary (Text tab) and the
    JSON document under plugins/tf_stitch/ (the tf_stitch tab). Built aside, then moved in."""
    import tensorflow as tf

    def fill(staging: Path) -> None:
        writer = tf.summary.create_file_writer(str(staging))
        with writer.as_default():
            tf.summary.text("tf_stitch/bench", table, step=0)
        writer.close()
        plugin = staging / metadata.PLUGIN_DIR
        plugin.mkdir(parents=True)
        (plugin / PLUGIN_FILE).write_text(json.dumps(doc, indent=2, default=str))

    return replace_dir(out / TENSORBOARD_DIR / run, fill)


def run_bench(
    names: Sequence[str] | None = None,
    out_dir: str | os.PathLike[str] = "tf_stitch_bench",
    *,
    rounds: int = 10,
    gpu_target: str | None = "h100",
    small: bool = False,
    stream: TextIO = sys.stdout,
) -> dict[str, Any]:
    """Measures each workload (a failure is recorded and the run goes on), prints the table,
    writes `bench.json`, `bench.md` and a TensorBoard run under `out_dir` (rewritten after each
    workload, so an interrupted run keeps what it finished), and returns the JSON document.
    `small=True` builds the workloads' small variants (for tests)."""
    from tf_stitch.workloads import WORKLOADS

    workloads = resolve_workloads(names)
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now().astimezone()
    meta = {
        "date": now.isoformat(timespec="minutes"),
        "machine": _machine(),
        "rounds": rounds,
        "gpu_target": gpu_target,
        "small": small,
    }
    run_name = "bench_" + now.strftime("%Y%m%d-%H%M%S")
    results: dict[str, Measurement] = {}
    failed: dict[str, str] = {}
    bar = Progress(len(workloads) * STAGES, stream, "bench")
    for i, name in enumerate(workloads):
        done = i * STAGES

        def step(label: str, name: str = name) -> None:
            nonlocal done
            bar.update(done, f"{name}: {label}")
            done += 1

        try:
            step("build")
            module = WORKLOADS[name]
            w = module.build(small=True) if small else module.build()
            results[name] = measure_function(
                w.fn, w.input_signature, w.inputs, rounds, gpu_target=gpu_target, step=step
            )
        except Exception as e:  # recorded; the other workloads still run
            failed[name] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            print(f"\nbench: {name} failed:\n{traceback.format_exc()}", file=stream)
        doc = document(meta, results, failed)
        _write(out, run_name, meta, results, failed, doc)
    bar.update(bar.total, "done")
    print("\n" + report.text(report.rows(results, failed)).rstrip(), file=stream)
    for target, met in (doc["summary"].get("targets") or {}).items():
        print(f"  {target}: {report.verdict(met)}", file=stream)
    print(
        f"wrote {out / JSON_NAME}, {out / MARKDOWN_NAME}, {out / TENSORBOARD_DIR / run_name}",
        file=stream,
    )
    return doc


def _write(
    out: Path,
    run: str,
    meta: dict[str, Any],
    results: dict[str, Measurement],
    failed: dict[str, str],
    doc: dict[str, Any],
) -> None:
    atomic_write(out / JSON_NAME, json.dumps(doc, indent=2, default=str).encode())
    text = markdown_report(meta, results, failed)
    atomic_write(out / MARKDOWN_NAME, text.encode())
    write_tensorboard_run(out, run, doc, text)
