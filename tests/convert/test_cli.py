"""`tf-stitch convert`: converts, checks on random inputs, saves and prints the summary."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf

from tests.convert.conftest import stitched_nodes
from tf_stitch.cli import main

pytestmark = pytest.mark.usefixtures("kernel_cache")


def test_convert_command(
    module_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    rc = main(["convert", str(module_dir), str(out), "--targets", "cpu", "--input-shape", "x=?,16"])
    text = capsys.readouterr().out
    assert rc == 0
    assert "signature 'serving_default'" in text and "signature 'softmax'" in text
    assert "kernels per step (measured)" in text and "max abs diff" in text
    assert f"wrote {out}" in text
    loaded = tf.saved_model.load(str(out))
    graph = loaded.signatures["softmax"].graph.as_graph_def()
    assert stitched_nodes(graph)
