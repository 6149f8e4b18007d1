"""benchmarks/optimize_time.py: cold, warm and XLA:CPU compile times of a zoo model, each in a
fresh process, with the time of every pass."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_small_model_is_timed_cold_warm_and_against_xla(tmp_path: Path) -> None:
    out = tmp_path / "times.json"
    command = ["benchmarks/optimize_time.py", "--model", "lenet5", "--rounds", "1"]
    done = subprocess.run(
        [sys.executable, *command, "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "lenet5: optimize() cold" in done.stdout and "XLA:CPU compile" in done.stdout
    assert "first call of the optimized function" in done.stdout
    assert "largest pass:" in done.stdout
    assert "pass stitch" in done.stdout or "pass outline" in done.stdout
    runs = json.loads(out.read_text())["runs"]
    cold, warm = runs["cold"][0], runs["warm"][0]
    assert cold["kernels"] == warm["kernels"] >= 1
    assert 1 <= cold["distinct_sources"] <= cold["kernels"]
    assert all(s >= 0 for s in cold["stages"].values()) and runs["xla"][0]["seconds"] > 0
    assert isinstance(warm["first_call"], float)
    assert cold["stages"]["compile kernels"] > 0  # the compilers' time, apart from outline's
    assert warm["weight_bytes"] > 0 and warm["peak_bytes"] >= 0 and "peak memory" in done.stdout


def test_depth_scaling_prints_each_stage_per_layer(tmp_path: Path) -> None:
    out = tmp_path / "scaling.json"
    command = ["benchmarks/optimize_time.py", "--layers", "2,1", "--json", str(out)]
    done = subprocess.run(
        [sys.executable, *command], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ms per layer" in done.stdout and "total" in done.stdout
    scaling = json.loads(out.read_text())["scaling"]
    assert set(scaling) == {"1", "2"}
    assert scaling["2"]["kernels"] > scaling["1"]["kernels"] >= 1
    # the second layer's kernels are the first one's: no new sources
    assert scaling["2"]["distinct_sources"] <= scaling["1"]["distinct_sources"] + 1
    bad = subprocess.run(
        [sys.executable, "benchmarks/optimize_time.py", "--layers", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "at least 1" in bad.stderr
