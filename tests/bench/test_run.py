"""`tf-stitch bench` end to end on a small workload: the table, the JSON, the Markdown and the
TensorBoard run; a failing workload is recorded and the others still run; bad arguments."""

from __future__ import annotations

import io
import json
import types
from pathlib import Path

import pytest

from tb_plugin import metadata
from tf_stitch import cli
from tf_stitch.bench import run_bench
from tf_stitch.bench.run import JSON_NAME, MARKDOWN_NAME, PLUGIN_FILE, TENSORBOARD_DIR
from tf_stitch.launches.xla_gpu import unavailable
from tf_stitch.workloads import WORKLOADS

GPU_TARGET = None if unavailable() else "h100"


def _broken(batch: int = 1, small: bool = False, seed: int = 0) -> None:
    raise RuntimeError("this workload cannot be built")


def test_bench_writes_the_table_json_markdown_and_a_tensorboard_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(WORKLOADS, "broken", types.SimpleNamespace(build=_broken))
    out = io.StringIO()
    doc = run_bench(
        ["broken", "lr"], tmp_path, rounds=2, gpu_target=GPU_TARGET, small=True, stream=out
    )
    printed = out.getvalue()
    assert "bench [" in printed and "lr: timing" in printed  # the progress bar
    assert doc["failed"] == {"broken": "RuntimeError: this workload cannot be built"}
    lr = doc["workloads"]["lr"]
    assert lr["outputs_match"] and lr["max_abs_error"] < 1e-4
    k = lr["kernels"]
    assert k["tf"] > k["tf_stitch_cpu"] >= 1 and k["xla_cpu"] >= 1
    assert k["tf_stitch_gpu"] == sum(lr["gpu_by_type"].values()) >= 1
    if GPU_TARGET:
        assert k["xla_gpu_triton"] >= 1 and k["xla_gpu_cublas"] >= 1
    else:
        assert k["xla_gpu_triton"] is None and any("XLA:GPU not counted" in n for n in lr["notes"])
    assert set(lr["latency_ms"]) == {"TensorFlow", "XLA:CPU", "tf_stitch"}
    assert lr["latency_ms"]["tf_stitch"]["samples"] == 2 and lr["optimize_s"] > 0
    assert json.loads((tmp_path / JSON_NAME).read_text()) == json.loads(json.dumps(doc))
    md = (tmp_path / MARKDOWN_NAME).read_text()
    assert "| lr |" in md and "| broken | failed: RuntimeError" in md and "Targets:" in md
    assert "geometric mean" in printed and "wrote " in printed
    runs = list((tmp_path / TENSORBOARD_DIR).iterdir())
    assert len(runs) == 1 and runs[0].name.startswith("bench_")
    plugin = json.loads((runs[0] / metadata.PLUGIN_DIR / PLUGIN_FILE).read_text())
    assert plugin["workloads"]["lr"]["kernels"] == k
    assert list(runs[0].glob("events.out.tfevents.*"))


def test_bad_arguments_get_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "--workloads", "lr,nope", "--out", str(tmp_path / "o")]) == 2
    assert "unknown workload(s) nope; known: lr, w2v" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    afile = tmp_path / "file"
    afile.write_text("keep me")
    assert cli.main(["bench", "--workloads", "lr", "--out", str(afile)]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert afile.read_text() == "keep me"
    with pytest.raises(ValueError, match="rounds"):
        run_bench(["lr"], tmp_path / "r", rounds=0)
