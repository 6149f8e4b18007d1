"""`tf-stitch` on the command line: demo, optimize, explain, and bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

from tf_stitch.cli import main


def _write_graph(path: Path) -> None:
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 16], name="x")
        tf.identity(tf.nn.gelu(tf.nn.softmax(x), approximate=True), name="out")
    path.write_bytes(g.as_graph_def().SerializeToString())


def test_optimize_writes_an_optimized_graph(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst = tmp_path / "in.pb", tmp_path / "out.pb"
    _write_graph(src)
    assert main(["optimize", str(src), str(dst), "--outputs", "out"]) == 0
    gd = tf.compat.v1.GraphDef()
    gd.ParseFromString(dst.read_bytes())
    assert sum(n.op == "StitchedKernel" for n in gd.node) == 1
    assert "1 stitched kernels" in capsys.readouterr().out


def test_optimize_refuses_to_overwrite(tmp_path: Path) -> None:
    src, dst = tmp_path / "in.pb", tmp_path / "out.pb"
    _write_graph(src)
    dst.write_bytes(b"keep me")
    with pytest.raises(SystemExit, match="exists"):
        main(["optimize", str(src), str(dst)])
    assert dst.read_bytes() == b"keep me"


def test_bad_input_file_is_an_error_and_writes_nothing(tmp_path: Path) -> None:
    src, dst = tmp_path / "in.pb", tmp_path / "out.pb"
    src.write_bytes(b"\xff\xfe not a graph")
    assert main(["optimize", str(src), str(dst)]) == 2
    assert not dst.exists()
    with pytest.raises(SystemExit, match="no such file"):
        main(["explain", str(tmp_path / "missing.pb")])


def test_explain_prints_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.pb"
    _write_graph(src)
    assert main(["explain", str(src), "--outputs", "out"]) == 0
    out = capsys.readouterr().out
    assert "kernel" in out and "decisions:" in out


def test_demo_runs_end_to_end_small_and_its_model_converts(tmp_path: Path) -> None:
    """The console script itself, on a short sequence so that it stays quick; then, as the
    README shows, `tf-stitch convert` on the SavedModel the demo saved."""
    script = Path(sys.executable).with_name("tf-stitch")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "tf_stitch.cli"]
    done = subprocess.run(
        [*cmd, "demo", "--batch", "1", "--seq-len", "16", "--rounds", "2"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "match" in done.stdout and "kernels/step" in done.stdout
    assert "tf_stitch" in done.stdout and "XLA:CPU" in done.stdout
    assert (tmp_path / "tf_stitch_demo" / "encoder" / "saved_model.pb").is_file()
    assert "tf-stitch convert tf_stitch_demo/encoder tf_stitch_demo/encoder_stitched" in done.stdout
    converted = subprocess.run(
        [
            *cmd,
            "convert",
            "tf_stitch_demo/encoder",
            "tf_stitch_demo/encoder_stitched",
            "--targets",
            "cpu",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert converted.returncode == 0, converted.stderr[-2000:]
    assert "kernels replace" in converted.stdout and "max abs diff" in converted.stdout
    assert (tmp_path / "tf_stitch_demo" / "encoder_stitched" / "saved_model.pb").is_file()


def test_min_confidence_reads_a_percentage_or_a_fraction() -> None:
    from tf_stitch.cli import _fraction

    assert _fraction("3%") == pytest.approx(0.03) and _fraction("0.05") == 0.05
    import argparse

    for bad in ("3", "-1%", "abc", "100%"):
        with pytest.raises(argparse.ArgumentTypeError):
            _fraction(bad)
