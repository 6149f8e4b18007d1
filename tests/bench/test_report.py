"""The benchmark's summary and tables, on hand-made measurements with known ratios."""

from __future__ import annotations

import math

from tf_stitch.bench.measure import Measurement
from tf_stitch.bench.report import (
    HEADER,
    geomean,
    markdown,
    ratio,
    rows,
    run_header,
    summary,
    text,
    verdict,
)
from tf_stitch.profiler.measure.timing import Latency


def _m(
    tf: int,
    xla_cpu: int,
    triton: int | None,
    cublas: int | None,
    gpu: int,
    cpu: int,
    ms: tuple[float, float, float],
) -> Measurement:
    lat = {
        v: Latency(t, t * 0.9, t * 1.1, 5)
        for v, t in zip(("TensorFlow", "XLA:CPU", "tf_stitch"), ms, strict=True)
    }
    kernels = {
        "tf": tf,
        "tf_gpu": tf + 5,
        "xla_cpu": xla_cpu,
        "xla_gpu_triton": triton,
        "xla_gpu_cublas": cublas,
        "tf_stitch_gpu": gpu,
        "tf_stitch_cpu": cpu,
    }
    return Measurement(kernels, lat, 1.5, 1e-6, True, cpu)


RESULTS = {
    "a": _m(100, 40, 20, 25, 10, 8, (10.0, 8.0, 4.0)),  # GPU 10/20 = 0.5
    "b": _m(50, 20, 9, 8, 4, 4, (5.0, 4.0, 5.0)),  # GPU 4/8 = 0.5 (cuBLAS is XLA's best)
}


def test_geomean() -> None:
    assert math.isclose(geomean([2.0, 8.0]) or 0, 4.0)
    assert geomean([]) is None


def test_ratios_take_xla_gpus_better_backend() -> None:
    r = ratio(RESULTS, "tf_stitch_gpu", "xla_gpu")
    assert r.per_workload == {"a": 0.5, "b": 0.5} and math.isclose(r.geomean or 0, 0.5)
    assert r.above_one == []
    worse = {**RESULTS, "c": _m(10, 5, 2, None, 3, 3, (1.0, 1.0, 1.0))}
    assert ratio(worse, "tf_stitch_gpu", "xla_gpu").above_one == ["c"]
    missing = {"d": _m(10, 5, None, None, 3, 3, (1.0, 1.0, 1.0))}
    assert ratio(missing, "tf_stitch_gpu", "xla_gpu").per_workload == {}


def test_summary_says_which_targets_are_met() -> None:
    s = summary(RESULTS)
    assert math.isclose(s["kernels_tf_stitch_gpu_vs_xla_cpu"]["geomean"], math.sqrt(0.25 * 0.2))
    assert math.isclose(s["latency_tf_stitch_vs_xla_cpu"]["geomean"], math.sqrt(0.5 * 1.25))
    assert s["latency_tf_stitch_vs_xla_cpu"]["above_one"] == ["b"]
    assert list(s["targets"].values()) == [True, True, True]
    slow = summary({"a": _m(10, 10, 5, 5, 5, 5, (1.0, 1.0, 1.0))})
    assert list(slow["targets"].values()) == [False, True, False]
    # --no-xla-gpu: the XLA:GPU targets were not measured, neither met nor missed
    unmeasured = summary({"a": _m(10, 5, None, None, 2, 2, (1.0, 1.0, 1.0))})
    assert list(unmeasured["targets"].values()) == [None, None, True]
    assert [verdict(v) for v in unmeasured["targets"].values()] == [
        "n/a (not measured)",
        "n/a (not measured)",
        "met",
    ]


def test_tables_have_a_row_per_workload_failures_and_means() -> None:
    table = rows(RESULTS, {"c": "RuntimeError: " + "x" * 100})
    assert [r[0] for r in table] == ["a", "b", "c", "geometric mean"]
    assert all(len(r) == len(HEADER) for r in table)
    assert table[0][1:8] == ["100", "105", "40", "20/25", "10", "8", "0.50"]
    assert table[0][8] == "10.00 (9.00-11.00)"
    assert table[2][1].startswith("failed: RuntimeError") and table[2][1].endswith("...")
    md = markdown(table)
    assert md.splitlines()[0].startswith("| workload | TF | TF GPU | XLA:CPU |")
    assert len(md.splitlines()) == 2 + len(table)
    assert text(table).splitlines()[1].startswith("a ")


def test_every_benchmark_starts_with_the_date_machine_and_tensorflow() -> None:
    import os

    import tensorflow as tf

    now, line = run_header("5 interleaved rounds", "variables live")
    assert line.startswith(f"# {now} | ") and now[:4].isdigit()
    assert f"{os.cpu_count()} CPUs | TensorFlow {tf.__version__} | 5 interleaved rounds" in line
    assert line.endswith(" | variables live")
