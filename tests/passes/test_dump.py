"""Dumper: TF_STITCH_DUMP_DIR files, written without running the pipeline."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import tensorflow as tf
from google.protobuf import text_format
from graph_helpers import v1_graph

from tf_stitch.fusion.decision import Record, allow, forbid
from tf_stitch.graph.io import graph_to_graph_def
from tf_stitch.graph.ir import Graph
from tf_stitch.passes.base import KernelInfo, PassContext
from tf_stitch.passes.dump import Dumper
from tf_stitch.passes.stitch import stitch


def graph() -> Graph:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        tf.nn.relu(x, name="out")

    return v1_graph(build)


def kernel(name: str) -> KernelInfo:
    return KernelInfo(
        name, name, ["out"], "loop", "none", ["x:0"], ["out:0"], f"// source of {name}\n", "key"
    )


def test_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TF_STITCH_DUMP_DIR", raising=False)
    assert Dumper.from_env() is None
    monkeypatch.setenv("TF_STITCH_DUMP_DIR", "")
    assert Dumper.from_env() is None
    target = tmp_path / "a" / "b"
    monkeypatch.setenv("TF_STITCH_DUMP_DIR", str(target))
    dumper = Dumper.from_env()
    assert dumper is not None and dumper.root == target and target.is_dir()


def test_graph_after_a_pass_is_readable_text(tmp_path: Path) -> None:
    g = graph()
    Dumper(tmp_path).graph(3, "fold-constants", g)
    text = (tmp_path / "03_fold-constants.pbtxt").read_text()
    parsed = text_format.Parse(text, tf.compat.v1.GraphDef())
    assert parsed == graph_to_graph_def(g)


def test_finish_writes_plan_kernels_graph_and_repro(tmp_path: Path) -> None:
    g = graph()
    ctx = PassContext()
    ctx.records.extend(
        [Record("merge a -> b", allow("same loop")), Record("node c", forbid("stateful"))]
    )
    ctx.kernels.extend([kernel("stitched_0"), kernel("stitched_1")])
    Dumper(tmp_path).finish(g, ctx)
    plan = (tmp_path / "plan.txt").read_text().splitlines()
    assert plan == ["merge a -> b: allow(same loop)", "node c: forbid(stateful)"]
    assert (tmp_path / "stitched_1.cc").read_text() == "// source of stitched_1\n"
    optimized = tf.compat.v1.GraphDef.FromString((tmp_path / "optimized.pb").read_bytes())
    assert optimized == graph_to_graph_def(g)
    repro = (tmp_path / "repro.py").read_text()
    tree = ast.parse(repro)  # valid Python
    constants = {
        t.id: ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name) and t.id.isupper()
    }
    assert constants["INPUTS"] == ["x:0"] and constants["OUTPUTS"] == ["out:0"]
    assert "optimized.pb" in repro and "op_library.load()" in repro


def test_empty_plan_still_writes_files(tmp_path: Path) -> None:
    Dumper(tmp_path).finish(graph(), PassContext())
    assert (tmp_path / "plan.txt").read_text() == "\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["optimized.pb", "plan.txt", "repro.py"]


def test_groups_txt_names_each_group_s_members(tmp_path: Path) -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        tf.exp(tf.nn.relu(x), name="out")

    g = v1_graph(build)
    ctx = PassContext()
    stitch.run(g, ctx)
    assert ctx.plan is not None and ctx.plan.groups
    Dumper(tmp_path).finish(g, ctx)
    groups = (tmp_path / "groups.txt").read_text().splitlines()
    assert groups == [f"group {g.id}: {', '.join(g.names)}" for g in ctx.plan.groups]
