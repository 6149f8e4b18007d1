"""benchmarks/real_models_table.py: the README's table and the targets from real_models.py's
JSON, several runs merged, and a clear error for a file that is not one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.real_models import _write_json, targets
from benchmarks.real_models_table import fill_xla_gpu, load, markdown_row
from tf_stitch.bench.measure import Measurement
from tf_stitch.profiler.measure.stability import Estimate
from tf_stitch.profiler.measure.timing import Latency


def _m(tf_ms: float, ts_ms: float, ratio: Estimate, confirmed: int = 0) -> Measurement:
    lat = {
        "TensorFlow": Latency(tf_ms, tf_ms * 0.9, tf_ms * 1.1, 3, (tf_ms,) * 3),
        "XLA:CPU": Latency(2 * tf_ms, tf_ms, 3 * tf_ms, 3, (2 * tf_ms,) * 3),
        "tf_stitch": Latency(ts_ms, ts_ms * 0.9, ts_ms * 1.1, 3, (ts_ms,) * 3),
    }
    kernels = {
        "tf": 100,
        "tf_gpu": 120,
        "xla_cpu": 60,
        "xla_gpu_triton": 50,
        "xla_gpu_cublas": 40,
        "tf_stitch_gpu": 30,
        "tf_stitch_cpu": 35,
    }
    return Measurement(kernels, lat, 1.5, 1e-7, True, 4, ratio=ratio, confirm_rounds=confirmed)


def test_runs_merge_and_round_trip(tmp_path: Path) -> None:
    first = {"a": _m(10, 8, Estimate(0.8, 0.7, 0.9, 3)), "b": _m(10, 11, Estimate(1.1, 1, 1.2, 3))}
    second = {"b": _m(10, 10, Estimate(1.01, 0.99, 1.02, 25), confirmed=25)}
    _write_json(str(tmp_path / "1.json"), "2026-12-04T08:00+00:00", first)
    _write_json(str(tmp_path / "2.json"), "2026-12-04T09:00+00:00", second)
    runs, results = load([str(tmp_path / "1.json"), str(tmp_path / "2.json")])
    assert len(runs) == 2 and "2026-12-04T09:00" in runs[1]
    assert list(results) == ["a", "b"]
    assert results["b"].confirm_rounds == 25 and results["b"].ratio == second["b"].ratio
    assert results["a"].latency["tf_stitch"].times_ms == (8, 8, 8)
    row = markdown_row("b", results["b"])
    assert "| 40 | 30 | 35 |" in row and "1.01 [0.99–1.02] (25 rounds alone)" in row
    lines = targets(results)
    assert any("1.03x TensorFlow" in line and line.endswith("misses none") for line in lines)


def test_the_confirmed_ratio_is_what_the_target_judges() -> None:
    # medians say 1.10x; the rounds alone said 1.05x: still a miss, named
    lines = targets({"m": _m(10, 11, Estimate(1.05, 1.04, 1.06, 25), confirmed=25)})
    assert any("1.03x TensorFlow" in line and line.endswith("misses m") for line in lines)


def test_a_file_that_is_not_a_run_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"date": "x"}))
    with pytest.raises(SystemExit, match=r"not a real_models\.py --json file"):
        load([str(bad)])
    with pytest.raises(SystemExit, match=r"not a real_models\.py --json file"):
        load([str(tmp_path / "missing.json")])


def test_xla_gpu_counts_of_earlier_runs_fill_a_run_without_them(tmp_path: Path) -> None:
    counts = tmp_path / "counts.json"
    counts.write_text(json.dumps({"about": "x", "counts": {"a": 45, "b": 40}}))
    a = _m(10, 8, Estimate(0.8, 0.7, 0.9, 3))
    a.kernels["xla_gpu_triton"] = a.kernels["xla_gpu_cublas"] = None
    b = _m(10, 8, Estimate(0.8, 0.7, 0.9, 3))  # compiled in this run: 40, as the file says
    results = {"a": a, "b": b}
    assert fill_xla_gpu(results, str(counts)) == {"a"}
    assert a.xla_gpu_best() == 45 and "| 45† |" in markdown_row("a", a, True)
    b.kernels["xla_gpu_cublas"] = 39
    with pytest.raises(SystemExit, match="counted 39 in this run, 40"):
        fill_xla_gpu({"b": b}, str(counts))


def test_the_counts_file_covers_every_model_of_the_zoo() -> None:
    from tf_stitch.zoo import zoo

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "xla_gpu_counts.json"
    counts = json.loads(path.read_text())["counts"]
    assert {f"zoo:{n}" for n in zoo()} <= set(counts)
    assert all(isinstance(v, int) and v > 0 for v in counts.values())
