"""The whole pipeline: TF_STITCH_DEBUG levels on stderr and TF_STITCH_DUMP_DIR files."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format
from graph_helpers import (
    fingerprint,
    graph_of,
    spec,
    v1_graph,
)

from tf_stitch.graph.io import graph_to_graph_def
from tf_stitch.graph.ir import Graph
from tf_stitch.passes.base import PassContext
from tf_stitch.passes.pipeline import PIPELINE, debug_level, run_pipeline
from tf_stitch.runtime.compilers import COMPILERS

ROOT = Path(__file__).resolve().parents[2]
BIAS = np.float32([0.5, -1.0, 2.0, 0.0])
COUNT_LINE = re.compile(r"^\[tf_stitch\] ([\w-]+): (\d+) -> (\d+) nodes \(.*\)$")


@pytest.fixture(scope="module", autouse=True)
def private_kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("tf_stitch_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TF_STITCH_CACHE_DIR", str(path))
        mp.delenv("TF_STITCH_DUMP_DIR", raising=False)
        mp.delenv("TF_STITCH_DEBUG", raising=False)
        yield path


def model(x: tf.Tensor) -> tf.Tensor:
    return tf.nn.softmax(tf.nn.bias_add(x * 2.0, tf.constant(BIAS)))


@pytest.fixture(scope="module")
def graph() -> Graph:
    return graph_of(model, spec(None, 4))


def run(
    graph: Graph, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], level: str
) -> tuple[Graph, PassContext, list[str]]:
    monkeypatch.setenv("TF_STITCH_DEBUG", level)
    capsys.readouterr()
    before = fingerprint(graph)
    out, ctx = run_pipeline(graph, compilers=COMPILERS)
    assert fingerprint(graph) == before
    captured = capsys.readouterr()
    assert "[tf_stitch]" not in captured.out
    return out, ctx, captured.err.splitlines()


def count_lines(lines: list[str]) -> list[re.Match[str]]:
    return [m for line in lines if (m := COUNT_LINE.match(line))]


def test_level_0_prints_nothing(
    graph: Graph, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, err = run(graph, monkeypatch, capsys, "0")
    assert not any("[tf_stitch]" in line for line in err)


def test_unreadable_level_means_0(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_STITCH_DEBUG", "verbose")
    assert debug_level() == 0
    monkeypatch.setenv("TF_STITCH_DEBUG", "3")
    assert debug_level() == 3


def test_level_1_prints_the_node_count_change_of_every_pass(
    graph: Graph, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out, ctx, err = run(graph, monkeypatch, capsys, "1")
    lines = count_lines(err)
    assert [m.group(1) for m in lines] == [p.name for p in PIPELINE]
    counts = [(int(m.group(2)), int(m.group(3))) for m in lines]
    assert counts[0][0] == len(graph) and counts[-1][1] == len(out)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(counts))
    assert len(err) == len(lines)  # no records, graphs or kernels at level 1
    assert ctx.kernels and "StitchedKernel" in {n.op for n in out}


def test_level_2_adds_every_decision_with_its_reason(
    graph: Graph, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, ctx, err = run(graph, monkeypatch, capsys, "2")
    records = [line for line in err if line.startswith("[tf_stitch]   ")]
    assert records == [f"[tf_stitch]   {r}" for r in ctx.records] and records
    assert any("allow(" in line for line in records)
    assert len(count_lines(err)) == len(PIPELINE)
    assert not any(line.startswith("  ") and " = " in line for line in err)


def test_level_3_adds_the_graph_after_each_pass(
    graph: Graph, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _, err = run(graph, monkeypatch, capsys, "3")
    placeholder = [line for line in err if line.startswith("  x = Placeholder() -> (None, 4)")]
    assert len(placeholder) == len(PIPELINE)
    last_count = max(i for i, line in enumerate(err) if COUNT_LINE.match(line))
    final_text = err[last_count + 1 : last_count + 1 + len(out)]
    assert [line.split(" = ")[0].strip() for line in final_text] == list(out.nodes)
    assert not any(line.startswith("[tf_stitch] kernel ") for line in err)


def test_level_4_adds_the_kernels(
    graph: Graph, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, ctx, err = run(graph, monkeypatch, capsys, "4")
    text = "\n".join(err)
    for k in ctx.kernels:
        assert f"[tf_stitch] kernel {k.name}:\n{k.source.rstrip()}" in text


def test_dump_dir_gets_every_pass_the_plan_the_kernels_and_a_runnable_repro(
    graph: Graph, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    dump = tmp_path / "dump"
    monkeypatch.setenv("TF_STITCH_DUMP_DIR", str(dump))
    out, ctx = run_pipeline(graph, compilers=COMPILERS)
    for i, p in enumerate(PIPELINE):
        text = (dump / f"{i:02d}_{p.name}.pbtxt").read_text()
        text_format.Parse(text, tf.compat.v1.GraphDef())
    final = text_format.Parse(
        (dump / f"{len(PIPELINE) - 1:02d}_{PIPELINE[-1].name}.pbtxt").read_text(),
        tf.compat.v1.GraphDef(),
    )
    assert final == graph_to_graph_def(out)
    assert (dump / "plan.txt").read_text().splitlines() == [str(r) for r in ctx.records]
    assert ctx.kernels and any(n.op == "StitchedKernel" for n in out)
    for k in ctx.kernels:
        assert (dump / f"{k.name}.cc").read_text() == k.source
    # In a fresh process, as the op library is loaded once per process: run the repro, then
    # compare the optimized graph with the original on random inputs.
    (tmp_path / "original.pb").write_bytes(graph_to_graph_def(graph).SerializeToString())
    compare = tmp_path / "compare.py"
    compare.write_text(
        COMPARE.format(
            repro=str(dump / "repro.py"),
            original=str(tmp_path / "original.pb"),
            optimized=str(dump / "optimized.pb"),
            feed=str(graph.inputs[0]),
            fetch=str(graph.outputs[0]),
        )
    )
    result = run_repro(compare, tmp_path)
    assert re.search(r"^Identity:0 \(2, 4\) float32 \d", result, re.M), result
    assert result.splitlines()[-1] == "same values"


COMPARE = """
import runpy
import numpy as np
import tensorflow as tf

runpy.run_path({repro!r})


def run(path, value):
    gd = tf.compat.v1.GraphDef.FromString(open(path, "rb").read())
    with tf.Graph().as_default() as g:
        tf.graph_util.import_graph_def(gd, name="")
        with tf.compat.v1.Session(graph=g) as sess:
            return sess.run({fetch!r}, {{{feed!r}: value}})


for batch in (1, 5):
    x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
    np.testing.assert_allclose(run({optimized!r}, x), run({original!r}, x), rtol=1e-5, atol=1e-5)
print("same values")
"""


def run_repro(script: Path, cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(
        [sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_repro_runs_with_unknown_rank_and_integer_inputs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, None, name="x")
        n = tf.compat.v1.placeholder(tf.int32, [None, 2], name="n")
        tf.nn.relu(x * 2.0, name="out")
        tf.add(n, 1, name="n_out")

    monkeypatch.setenv("TF_STITCH_DUMP_DIR", str(tmp_path))
    run_pipeline(v1_graph(build), compilers=COMPILERS)
    stdout = run_repro(tmp_path / "repro.py", tmp_path)
    assert "out:0 (2,) float32" in stdout and "n_out:0 (2, 2) int32" in stdout


def test_every_pass_module_has_its_own_test() -> None:
    root = Path(__file__).resolve().parents[2]
    modules = [p.stem for p in (root / "tf_stitch" / "passes").glob("*.py")]
    missing = [
        m for m in modules if m != "__init__" and not (root / f"tests/passes/test_{m}.py").exists()
    ]
    assert not missing, f"passes without tests/passes/test_<name>.py: {missing}"
