"""`characterize` end to end: three small models profiled in their own processes, a model that
raises and one whose process dies recorded as failed, the report written, a rerun skipping what
is done."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest
import tensorflow as tf

from tf_stitch.characterize import storage
from tf_stitch.characterize.campaign import characterize, select_models
from tf_stitch.characterize.shards import parse_shard
from tf_stitch.cli import main
from tf_stitch.profiler.store.profile import Profile

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = "tests.characterize.zoo_fixtures"
OK = ["lenet5", "mlp", f"{FIXTURES}:tiny"]
BAD = [f"{FIXTURES}:raising", f"{FIXTURES}:crashing"]
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> dict:  # type: ignore[type-arg]
    mp = pytest.MonkeyPatch()
    mp.setenv("PYTHONPATH", str(ROOT))
    mp.chdir(ROOT)
    root = tmp_path_factory.mktemp("characterize")
    log = io.StringIO()
    first = characterize(
        OK + BAD,
        batch_sizes=[1],
        logdir=str(root / "logdir"),
        report=str(root / "report"),
        steps=3,
        warmup=1,
        progress=log,
        jobs=2,
    )
    yield {"root": root, "first": first, "log": log.getvalue()}
    mp.undo()


def test_every_model_ran_and_the_bad_ones_are_recorded(campaign: dict) -> None:  # type: ignore[type-arg]
    first = campaign["first"]
    assert first["ran"] == OK + BAD
    assert sorted(first["failed"]) == sorted(BAD)
    logdir = str(campaign["root"] / "logdir")
    raising = storage.read_record(logdir, BAD[0])
    assert raising is not None and raising["status"] == "failed"
    assert "planted failure while building" in raising["error"]
    assert raising["stage"] == "build"
    crashing = storage.read_record(logdir, BAD[1])
    assert crashing is not None and crashing["status"] == "failed"
    assert "died" in crashing["error"] and crashing["stage"] == "process"
    assert "about" in campaign["log"] or "3/5" in campaign["log"]  # the progress bar ran


def test_profiles_and_records_of_the_good_models(campaign: dict) -> None:  # type: ignore[type-arg]
    logdir = campaign["root"] / "logdir"
    for model in OK:
        rec = storage.read_record(str(logdir), model)
        assert rec is not None and rec["status"] == "ok", rec
        assert rec["peaks"]["flops_per_s"] > 1e8 and rec["peaks"]["bytes_per_s"] > 1e8
        p = Profile.load(logdir, rec["runs"]["1"])
        assert {"model", "layer", "op"} <= set(p.meta["levels"])
        assert not p.ops.empty
        assert rec["outputs_match"] is True, rec
        stitched = Profile.load(logdir, rec["stitched_run"])
        assert (stitched.spans.type == "StitchedKernel").any()
        assert (logdir / storage.LOGS / f"{storage.safe_name(model)}.log").is_file()


def test_report_files(campaign: dict) -> None:  # type: ignore[type-arg]
    report = campaign["root"] / "report"
    assert campaign["first"]["report"] == str(report)
    models = pd.read_csv(report / "tables" / "models.csv")
    assert len(models) == 5
    assert sorted(models[models.status == "ok"].model) == sorted(OK)
    ok = models[models.status == "ok"].set_index("model")
    assert (ok.latency_ms > 0).all() and (ok.launches_per_step > 0).all()
    assert (ok.gflops_per_step > 0).all()
    fusion = pd.read_csv(report / "tables" / "fusion.csv").set_index("model")
    assert set(fusion.index) == set(OK) and fusion.outputs_match.all()
    tiny = fusion.loc[OK[2]]  # Dense + LayerNorm + softmax: 13 launches in TensorFlow
    assert tiny.kernels_after < tiny.kernels_before
    for name in (
        "top_layers",
        "top_ops",
        "layer_types",
        "layer_variance",
        "roofline_layers",
        "roofline_ops",
        "latency_by_batch",
        "kernels_by_name",
        "kernels_per_layer",
        "op_types",
        "op_types_zoo",
        "families",
    ):
        assert (report / "tables" / f"{name}.csv").is_file(), name
        assert (report / "tables" / f"{name}.md").is_file(), name
    plots = sorted(p.name for p in (report / "plots").iterdir())
    assert plots == [
        "fusion.png",
        "latency_vs_batch.png",
        "layer_types.png",
        "op_types.png",
        "roofline.png",
        "top_layers.png",
    ]
    for p in (report / "plots").iterdir():
        assert p.read_bytes()[:8] == PNG
    index = (report / "index.html").read_text()
    assert all(f"plots/{name}" in index for name in plots)
    text = (report / "report.md").read_text()
    assert "| mlp |" in text and "## Findings" in text
    assert "Failed: " in text and "planted failure" in text


def test_a_second_run_skips_finished_models(campaign: dict) -> None:  # type: ignore[type-arg]
    logdir = campaign["root"] / "logdir"
    record = storage.record_path(str(logdir), "mlp")
    before = Path(record).stat().st_mtime_ns
    second = characterize(
        OK,
        batch_sizes=[1],
        logdir=str(logdir),
        report=None,
        steps=3,
        warmup=1,
        progress=io.StringIO(),
    )
    assert second["ran"] == [] and sorted(second["skipped"]) == sorted(OK)
    assert Path(record).stat().st_mtime_ns == before
    assert json.loads(Path(record).read_text())["status"] == "ok"


def test_shards_split_the_zoo() -> None:
    assert parse_shard("2/3") == (2, 3)
    for bad in ("0/2", "3/2", "x", "1/"):
        with pytest.raises(ValueError, match="shard"):
            parse_shard(bad)
    parts = [select_models("all", (i, 3)) for i in (1, 2, 3)]
    everything = select_models("all")
    assert sorted(m for part in parts for m in part) == sorted(everything) and len(everything) >= 65
    assert not set(parts[0]) & set(parts[1])


def test_unknown_models_and_bad_arguments_fail_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown model 'nope'"):
        characterize(["nope"], logdir=str(tmp_path), report=None)
    with pytest.raises(ValueError, match="batch sizes"):
        characterize(["mlp"], batch_sizes=[0], logdir=str(tmp_path), report=None)
    assert not any(tmp_path.iterdir())


def test_a_model_profiled_without_tf_stitch_gets_only_that_part_later(tmp_path: Path) -> None:
    logdir = str(tmp_path / "logdir")
    kw = dict(batch_sizes=[1], logdir=logdir, report=None, steps=3, warmup=1)
    first = characterize(["lenet5"], optimize=False, progress=io.StringIO(), **kw)
    assert first["ran"] == ["lenet5"]
    before = storage.read_record(logdir, "lenet5")
    assert before is not None and "stitched_run" not in before
    again = characterize(["lenet5"], optimize=False, progress=io.StringIO(), **kw)
    assert again["ran"] == []
    second = characterize(["lenet5"], optimize=True, progress=io.StringIO(), **kw)
    assert second["ran"] == ["lenet5"]
    after = storage.read_record(logdir, "lenet5")
    assert after is not None and after["runs"] == before["runs"]  # the base profile was kept
    assert after["peaks"] == before["peaks"] and after["stitched_run"]
    assert after["earlier_wall_s"] == pytest.approx(before["wall_s"])


def test_the_tab_lists_the_campaigns_profiles(campaign: dict) -> None:  # type: ignore[type-arg]
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tb_plugin.plugin import TfStitchPlugin

    logdir = campaign["root"] / "logdir"
    apps = TfStitchPlugin(base_plugin.TBContext(logdir=str(logdir))).get_plugin_apps()
    body = json.loads(Client(apps["/runs"]).get("/runs").data)
    expected = {f"{storage.safe_name(m)}_b1{s}" for m in OK for s in ("", "_stitched")}
    assert set(body["profiles"]) == expected
    meta = json.loads(Client(apps["/meta"]).get("/meta", query_string={"run": "mlp_b1"}).data)
    assert meta["model"] == "mlp"


class _HeldOut(tf.Module):
    """A model that is not in the zoo: dense layer, tanh-GELU, a row normalization."""

    def __init__(self) -> None:
        super().__init__()
        self.w = tf.Variable(tf.random.stateless_normal([24, 48], seed=[7, 7]) * 0.2)
        self.b = tf.Variable(tf.zeros([48]))

    @tf.function(input_signature=[tf.TensorSpec([None, 24], tf.float32, name="features")])
    def serve(self, features: tf.Tensor) -> dict[str, tf.Tensor]:
        h = tf.nn.gelu(tf.matmul(features, self.w) + self.b, approximate=True)
        mean, var = tf.nn.moments(h, axes=[1], keepdims=True)
        return {"scores": (h - mean) * tf.math.rsqrt(var + 1e-5)}


def test_a_saved_model_that_is_not_in_the_zoo(tmp_path: Path) -> None:
    module = _HeldOut()
    path = tmp_path / "held_out_model"
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    logdir = str(tmp_path / "logdir")
    result = characterize(
        [str(path)],
        batch_sizes=[4],
        logdir=logdir,
        report=str(tmp_path / "report"),
        steps=3,
        warmup=1,
        progress=io.StringIO(),
    )
    assert result["failed"] == []
    rec = storage.read_record(logdir, str(path))
    assert rec is not None and rec["status"] == "ok" and rec["family"] == "file"
    assert rec["outputs_match"] is True and rec["stitched_kernels"] >= 1
    p = Profile.load(logdir, rec["runs"]["4"])
    assert p.meta["batch"] == 4
    # The restored function's ops are in the op table under the names the executor ran them
    # with; the function was saved for any batch, so the batch dimension is unknown there.
    ops = p.ops.set_index("name")
    traced = p.level("op")
    ran = set(traced.name)
    # The MatMul ran on its own, or (oneDNN on CPUs with AVX-512) fused with the bias add into
    # one op named as the add.
    kinds = {"MatMul", "_FusedMatMul", "_MklNativeFusedMatMul", "_MklFusedMatMul"}
    matmul = sorted(set(traced[traced.type.isin(kinds)].name))
    assert len(matmul) == 1 and matmul[0] in ops.index
    (node,) = ops.index[ops.op == "MatMul"]
    assert matmul[0] in (node, node.rsplit("/", 1)[0] + "/add")
    assert ops.loc[node, "input_shapes"] == [[-1, 24], [24, 48]]
    assert ran <= set(ops.index) | {n for n in ran if "ArithmeticOptimizer" in n}
    roof = pd.read_csv(tmp_path / "report" / "tables" / "roofline_ops.csv")
    assert set(roof[roof.type.isin(kinds)].bound) == {"unknown"}


def test_report_only_reports_what_the_shards_wrote_and_runs_nothing(
    campaign: dict,  # type: ignore[type-arg]
) -> None:
    logdir = campaign["root"] / "logdir"
    record = storage.record_path(str(logdir), "mlp")
    before = Path(record).stat().st_mtime_ns
    out = campaign["root"] / "merged_report"
    argv = ["characterize", "--report-only", "--logdir", str(logdir), "--report", str(out)]
    assert main(argv) == 0
    assert (out / "index.html").is_file() and Path(record).stat().st_mtime_ns == before
    models = set(pd.read_csv(out / "tables" / "models.csv").model)
    assert {"lenet5", "mlp"} <= models
