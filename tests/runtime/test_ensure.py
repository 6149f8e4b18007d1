"""ensure_compiled: a graph optimized elsewhere (or with a cleared cache) runs after it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tf_stitch
from tf_stitch.runtime import ensure_compiled


def _graph_def() -> tf.compat.v1.GraphDef:
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 16], name="x")
        tf.identity(tf.nn.softmax(x) * 3.0, name="out")
    return g.as_graph_def()


def _run(graph_def: tf.compat.v1.GraphDef, x: np.ndarray) -> np.ndarray:
    with tf.Graph().as_default() as g:
        tf.graph_util.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=g) as sess:
            return sess.run("out:0", {"x:0": x})


def test_missing_kernels_give_a_clear_error_and_ensure_compiled_fixes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = np.random.default_rng(0).standard_normal([3, 16]).astype(np.float32)
    monkeypatch.setenv("TF_STITCH_CACHE_DIR", str(tmp_path / "a"))
    optimized = tf_stitch.optimize(_graph_def(), outputs=["out"])
    expected = _run(_graph_def(), x)
    np.testing.assert_allclose(_run(optimized, x), expected, rtol=1e-6)

    monkeypatch.setenv("TF_STITCH_CACHE_DIR", str(tmp_path / "b"))  # as on another machine
    with pytest.raises(tf.errors.FailedPreconditionError, match="ensure_compiled"):
        _run(optimized, x)
    ready = ensure_compiled(optimized.SerializeToString())
    assert [n.op for n in ready.node] == [n.op for n in optimized.node]
    np.testing.assert_allclose(_run(ready, x), expected, rtol=1e-6)
