"""benchmarks/real_models.py --fill-gpu-counts: a run's rows without a GPU count are counted in
the child (a real one, on a small zoo model) and written with the rest as measured; a file that
is not a run is a clear error."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.real_models import fill_gpu_counts

ARGS = argparse.Namespace(seed=0, keras_init=False, freeze=False)


def _row(gpu: int | None) -> dict[str, object]:
    kernels = {"tf": 20, "tf_gpu": 20, "xla_cpu": 9, "tf_stitch_cpu": 5, "tf_stitch_gpu": gpu}
    return {"kernels": kernels, "max_abs_error": 1e-8, "outputs_match": True, "notes": ["kept"]}


def test_a_missing_gpu_count_is_counted_and_the_rest_kept(tmp_path: Path) -> None:
    run = tmp_path / "run.json"
    payload = {"date": "2026-12-04T10:00", "machine": "vm", "results": {}}
    payload["results"] = {"zoo:lr": _row(None), "zoo:w2v": _row(7)}
    run.write_text(json.dumps(payload))
    out = tmp_path / "filled.json"
    assert fill_gpu_counts(str(run), str(out), ARGS) == 1
    filled = json.loads(out.read_text())
    assert filled["date"] == "2026-12-04T10:00"  # the run's, not the fill's
    lr, w2v = filled["results"]["zoo:lr"], filled["results"]["zoo:w2v"]
    assert isinstance(lr["kernels"]["tf_stitch_gpu"], int) and lr["kernels"]["tf_stitch_gpu"] > 0
    assert lr["kernels"]["tf_stitch_cpu"] == 5 and lr["outputs_match"]
    assert "kept" in lr["notes"] and any("--fill-gpu-counts" in n for n in lr["notes"])
    assert w2v == _row(7)
    assert json.loads(run.read_text()) == payload  # the run itself is left as it was


def test_a_file_that_is_not_a_run_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"results": [1, 2]}))
    with pytest.raises(SystemExit, match=r"not a real_models\.py --json file"):
        fill_gpu_counts(str(bad), str(tmp_path / "out.json"), ARGS)
    with pytest.raises(SystemExit, match=r"not a real_models\.py --json file"):
        fill_gpu_counts(str(tmp_path / "missing.json"), str(tmp_path / "out.json"), ARGS)
