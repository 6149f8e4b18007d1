"""The benchmark's summary (geometric means, targets) and its tables, as plain data and text."""

from __future__ import annotations

import datetime
import math
import os
import platform
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tf_stitch.bench.measure import KERNEL_COLUMNS, Measurement

# The launch-count issue's targets: tf_stitch's GPU kernels at most 0.7x XLA:GPU's (geometric
# mean, and never more on any workload), at most 0.4x XLA:CPU's.
TARGET_VS_XLA_GPU = 0.7
TARGET_VS_XLA_CPU = 0.4


def run_header(*details: str) -> tuple[str, str]:
    """(the time now, the first line a benchmark prints): date, machine, CPUs and TensorFlow's
    version, then `details`."""
    import tensorflow as tf

    now = datetime.datetime.now().astimezone().isoformat(timespec="minutes")
    cpu = platform.processor() or platform.machine()
    parts = [f"# {now}", platform.node(), f"{cpu}, {os.cpu_count()} CPUs"]
    return now, " | ".join([*parts, f"TensorFlow {tf.__version__}", *details])


def geomean(values: Iterable[float]) -> float | None:
    """Geometric mean of positive values; None for none."""
    logs = [math.log(v) for v in values if v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else None


@dataclass(frozen=True)
class Ratio:
    """One ratio over the workloads: per workload, geometric mean, and where it exceeds 1."""

    per_workload: dict[str, float]
    geomean: float | None
    above_one: list[str] = field(default_factory=list)


def ratio(results: Mapping[str, Measurement], num: str, den: str) -> Ratio:
    """Kernel-count ratio `num`/`den` (keys of KERNEL_COLUMNS, or "xla_gpu" for the better of
    XLA:GPU's two GEMM backends) over the workloads where both were counted."""
    values: dict[str, float] = {}
    for name, m in results.items():
        a = _count(m, num)
        b = _count(m, den)
        if a is not None and b:
            values[name] = a / b
    return Ratio(values, geomean(values.values()), [n for n, v in values.items() if v > 1])


def latency_ratio(results: Mapping[str, Measurement], den: str) -> Ratio:
    """tf_stitch's median CPU latency over `den`'s ("TensorFlow" or "XLA:CPU")."""
    values = {
        name: m.latency["tf_stitch"].median_ms / m.latency[den].median_ms
        for name, m in results.items()
    }
    return Ratio(values, geomean(values.values()), [n for n, v in values.items() if v > 1])


def _count(m: Measurement, key: str) -> int | None:
    return m.xla_gpu_best() if key == "xla_gpu" else m.kernels.get(key)


def summary(results: Mapping[str, Measurement]) -> dict[str, Any]:
    """The geometric means and the issue's targets: met (True), not (False), or None where
    what a target compares was not measured (`--no-xla-gpu`)."""
    vs_gpu = ratio(results, "tf_stitch_gpu", "xla_gpu")
    vs_cpu = ratio(results, "tf_stitch_gpu", "xla_cpu")
    cpu_vs_cpu = ratio(results, "tf_stitch_cpu", "xla_cpu")
    lat_tf, lat_xla = latency_ratio(results, "TensorFlow"), latency_ratio(results, "XLA:CPU")
    return {
        "kernels_tf_stitch_gpu_vs_xla_gpu": vs_gpu.__dict__,
        "kernels_tf_stitch_gpu_vs_xla_cpu": vs_cpu.__dict__,
        "kernels_tf_stitch_cpu_vs_xla_cpu": cpu_vs_cpu.__dict__,
        "latency_tf_stitch_vs_tf": lat_tf.__dict__,
        "latency_tf_stitch_vs_xla_cpu": lat_xla.__dict__,
        "targets": {
            f"GPU kernels <= {TARGET_VS_XLA_GPU}x XLA:GPU (geomean)": _at_most(
                vs_gpu.geomean, TARGET_VS_XLA_GPU
            ),
            "GPU kernels never more than XLA:GPU": (
                not vs_gpu.above_one if vs_gpu.per_workload else None
            ),
            f"GPU kernels <= {TARGET_VS_XLA_CPU}x XLA:CPU (geomean)": _at_most(
                vs_cpu.geomean, TARGET_VS_XLA_CPU
            ),
        },
    }


def _at_most(value: float | None, bound: float) -> bool | None:
    """Whether `value` is at most `bound`; None where it was not measured (no XLA:GPU)."""
    return None if value is None else value <= bound


def verdict(met: bool | None) -> str:
    """How a target reads: met, NOT met, or n/a where what it compares was not measured."""
    return "n/a (not measured)" if met is None else "met" if met else "NOT met"


def _cell(value: int | None) -> str:
    return "n/a" if value is None else str(value)


def _ratio_cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


HEADER = (
    "workload",
    "TF",
    "TF GPU",
    "XLA:CPU",
    "XLA:GPU Triton/cuBLAS",
    "tf_stitch GPU",
    "tf_stitch CPU",
    "GPU vs XLA:GPU",
    "TF ms",
    "XLA:CPU ms",
    "tf_stitch ms",
    "vs TF",
    "vs XLA:CPU",
    "optimize s",
)


def rows(results: Mapping[str, Measurement], failed: Mapping[str, str]) -> list[list[str]]:
    """One row per workload (kernels per step, latency medians with min-max, ratios), then the
    geometric means; failed workloads get a row that says so."""
    out: list[list[str]] = []
    gpu, lat_tf, lat_xla = (
        ratio(results, "tf_stitch_gpu", "xla_gpu"),
        latency_ratio(results, "TensorFlow"),
        latency_ratio(results, "XLA:CPU"),
    )
    for name, m in results.items():
        k, lat = m.kernels, m.latency
        out.append(
            [
                name,
                _cell(k["tf"]),
                _cell(k.get("tf_gpu")),
                _cell(k["xla_cpu"]),
                f"{_cell(k['xla_gpu_triton'])}/{_cell(k['xla_gpu_cublas'])}",
                _cell(k["tf_stitch_gpu"]),
                _cell(k["tf_stitch_cpu"]),
                _ratio_cell(gpu.per_workload.get(name)),
                *(str(lat[v]).replace(" ms", "") for v in ("TensorFlow", "XLA:CPU", "tf_stitch")),
                _ratio_cell(lat_tf.per_workload[name]),
                _ratio_cell(lat_xla.per_workload[name]),
                f"{m.optimize_s:.1f}",
            ]
        )
    for name, error in failed.items():
        short = error if len(error) <= 60 else error[:57] + "..."
        out.append([name, f"failed: {short}", *([""] * (len(HEADER) - 2))])
    if results:
        means = {k: geomean(_count(m, k) or 0 for m in results.values()) for k in KERNEL_COLUMNS}
        out.append(
            [
                "geometric mean",
                *(_ratio_cell(means[k]) for k in ("tf", "tf_gpu", "xla_cpu")),
                f"{_ratio_cell(means['xla_gpu_triton'])}/{_ratio_cell(means['xla_gpu_cublas'])}",
                *(_ratio_cell(means[k]) for k in ("tf_stitch_gpu", "tf_stitch_cpu")),
                _ratio_cell(gpu.geomean),
                "",
                "",
                "",
                _ratio_cell(lat_tf.geomean),
                _ratio_cell(lat_xla.geomean),
                "",
            ]
        )
    return out


def markdown(table: list[list[str]]) -> str:
    """A Markdown table with HEADER."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in table]
    return "\n".join(lines)


def text(table: list[list[str]]) -> str:
    """The same table, aligned for a terminal."""
    grid = [list(HEADER), *table]
    widths = [max(len(r[i]) for r in grid) for i in range(len(HEADER))]
    return "\n".join(
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in grid
    )
