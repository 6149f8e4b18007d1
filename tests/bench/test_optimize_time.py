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
    assert "pass stitch" in done.stdout or "pass outline" in done.stdout
    runs = json.loads(out.read_text())["runs"]
    cold, warm = runs["cold"][0], runs["warm"][0]
    assert cold["kernels"] == warm["kernels"] >= 1
    assert 1 <= cold["distinct_sources"] <= cold["kernels"]
    assert all(s >= 0 for s in cold["stages"].values()) and runs["xla"][0]["seconds"] > 0
