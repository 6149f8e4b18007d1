"""benchmarks/mixed_precision.py: the issue's targets judged from measured rows (recorded here,
so the judgement is checked without building the models)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks.mixed_precision import Row, targets

ROOT = Path(__file__).resolve().parents[2]


def _row(policy: str, stitched: int, gpu: int, xla: int, error: float, drift: float) -> Row:
    tf_drift = 0.0 if policy == "float32" else 6e-3
    return Row("encoder", policy, stitched, 130, stitched, gpu, xla, error, drift, tf_drift)


def test_kernels_within_ten_percent_of_float32_and_at_most_xla_gpus_are_met() -> None:
    rows = [
        _row("float32", 49, 125, 255, 1e-6, 1e-6),
        _row("mixed_float16", 51, 125, 315, 8e-3, 5e-3),
    ]
    lines = targets(rows)
    assert "encoder mixed_float16: stitched kernels (CPU) 51 vs float32's 49 (4%" in "\n".join(
        lines
    )
    assert not any("NOT met" in line for line in lines), lines


def test_too_many_kernels_or_more_than_xla_gpu_are_not_met() -> None:
    rows = [
        _row("float32", 18, 77, 161, 1e-6, 1e-6),
        _row("mixed_float16", 53, 220, 216, 1e-3, 2e-3),
    ]
    missed = [line for line in targets(rows) if "NOT met" in line]
    assert len(missed) == 3, missed  # stitched on the CPU and in the GPU model; XLA:GPU
    assert any("GPU model 220 vs XLA:GPU 216" in line for line in missed)


def test_outputs_beyond_the_tolerance_pass_only_as_close_to_float32_as_tensorflows() -> None:
    base = _row("float32", 49, 125, 255, 1e-6, 1e-6)
    closer = _row("mixed_float16", 49, 125, 255, 2e-2, 5e-3)  # TensorFlow's own: 6e-3
    further = _row("mixed_float16", 49, 125, 255, 2e-2, 9e-3)
    assert not any("NOT met" in line for line in targets([base, closer]))
    assert any("outputs within" in line and "NOT met" in line for line in targets([base, further]))


def test_an_unknown_model_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "mixed_precision.py"), "--only", "vgg"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "unknown models ['vgg']" in done.stderr
