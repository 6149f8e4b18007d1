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


def test_optimize_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = tmp_path / "in.pb", tmp_path / "out.pb"
    _write_graph(src)
    dst.write_bytes(b"keep me")
    assert main(["optimize", str(src), str(dst)]) == 2
    assert "exists (pass --overwrite" in capsys.readouterr().err
    assert dst.read_bytes() == b"keep me"


def test_bad_input_file_is_an_error_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Corrupt, missing and empty inputs: exit status 2 (bad input) and a message naming it."""
    src, dst = tmp_path / "in.pb", tmp_path / "out.pb"
    src.write_bytes(b"\xff\xfe not a graph")
    assert main(["optimize", str(src), str(dst)]) == 2
    assert not dst.exists()
    assert main(["explain", str(tmp_path / "missing.pb")]) == 2
    assert "missing.pb: no such file" in capsys.readouterr().err
    (tmp_path / "empty.pb").write_bytes(b"")
    for command in (["explain"], ["optimize"]):
        argv = [
            *command,
            str(tmp_path / "empty.pb"),
            *([str(dst)] if command == ["optimize"] else []),
        ]
        assert main(argv) == 2
        assert "empty.pb: the file is empty" in capsys.readouterr().err
    assert not dst.exists()


def test_tensorflows_native_log_lines_stay_off_the_terminal(tmp_path: Path) -> None:
    """`tf-stitch` in a process of its own: no TensorFlow line on stderr unless --verbose; a
    failed run prints the log's tail after all."""
    src = tmp_path / "in.pb"
    _write_graph(src)
    cli = [sys.executable, "-m", "tf_stitch.cli"]

    def stderr(*argv: str) -> tuple[int, list[str]]:
        done = subprocess.run([*cli, *argv], capture_output=True, text=True, timeout=300)
        return done.returncode, done.stderr.splitlines()

    assert stderr("explain", str(src), "--outputs", "out") == (0, [])
    assert stderr("--verbose", "explain", str(src), "--outputs", "out")[0] == 0  # its lines shown
    code, lines = stderr("explain", str(src), "--outputs", "no_such_node")
    assert code != 0 and lines  # the reason (and the log's tail, where TensorFlow wrote one)


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
    assert done.stderr.splitlines() == []  # no TensorFlow log line, no warning
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


# One exit-status convention for every command: 0 done, 2 bad input (1: it failed, see
# tests/test_hook.py for `run`, and the native-log test above).
EXIT_STATUS = [
    (["demo", "--batch", "0"], 2),
    (["optimize", "nowhere.pb", "out.pb"], 2),
    (["explain", "nowhere.pb"], 2),
    (["bench", "--workloads", "no_such_workload", "--no-xla-gpu"], 2),
    (["profile", "no_such_model"], 2),
    (["characterize", "--models", "no_such_model", "--no-report"], 2),
    (["convert", "nowhere", "out"], 2),
    (["run", "nowhere.py"], 2),
    (["op-library"], 0),
    (["saved-model-cli", "--help"], 0),
    (["zoo", "list"], 0),
    (["zoo", "no_such_action"], 2),
]


@pytest.mark.parametrize(("argv", "status"), EXIT_STATUS, ids=[" ".join(a) for a, _ in EXIT_STATUS])
def test_every_command_follows_the_exit_status_convention(
    argv: list[str], status: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's usage errors
        code = e.code
    assert code == status


def test_the_exit_status_table_covers_every_command() -> None:
    from tf_stitch.cli import parser

    commands = set(parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert commands == {argv[0] for argv, _ in EXIT_STATUS}
