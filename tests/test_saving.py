"""An OptimizedFunction is a tf.Module: tf.saved_model.save writes it with its live variables
and a default signature; loaded (here and in a fresh process) it gives the original's answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

import tf_stitch

FRESH = """
import sys
import numpy as np
import tensorflow as tf
import tf_stitch
x = np.load(sys.argv[2])
out = tf.saved_model.load(sys.argv[1]).signatures["serving_default"](inputs=x)
np.save(sys.argv[3], out["output_0"].numpy())
"""


def _model() -> keras.Model:
    keras.utils.set_random_seed(0)
    return keras.Sequential(
        [
            keras.layers.Input((16,)),
            keras.layers.Dense(32, activation="gelu"),
            keras.layers.LayerNormalization(),
            keras.layers.Dense(4),
        ]
    )


def test_an_optimized_keras_model_saves_and_loads(tmp_path: Path) -> None:
    model = _model()
    optimized = tf_stitch.optimize(model, input_signature=[tf.TensorSpec([None, 16])])
    assert isinstance(optimized, tf.Module)
    assert len(optimized.variables) == len(model.weights)
    assert len(optimized.live_variables) == len(model.weights)
    x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    saved = tmp_path / "saved"
    tf.saved_model.save(optimized, str(saved))
    loaded = tf.saved_model.load(str(saved))
    out = loaded.signatures["serving_default"](inputs=x)["output_0"].numpy()
    np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-5, atol=1e-5)
    ops = {
        n.op
        for f in loaded.signatures["serving_default"].graph.as_graph_def().library.function
        for n in f.node_def
    }
    assert "StitchedKernel" in ops
    # The variables were saved live: the loaded ones are variables, not constants.
    assert len(loaded.signatures["serving_default"].variables) == len(model.weights)
    np.save(tmp_path / "x.npy", x)
    done = subprocess.run(
        [sys.executable, "-c", FRESH, str(saved), str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), out, rtol=1e-6)


def test_dict_outputs_name_the_signature_s_outputs(tmp_path: Path) -> None:
    @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32)])
    def heads(x: tf.Tensor) -> dict[str, tf.Tensor]:
        y = tf.nn.relu(x * 2.0 + 1.0)
        return {"probs": tf.nn.softmax(y), "total": tf.reduce_sum(y, -1)}

    optimized = tf_stitch.optimize(heads)
    tf.saved_model.save(optimized, str(tmp_path / "saved"))
    signature = tf.saved_model.load(str(tmp_path / "saved")).signatures["serving_default"]
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(3, 8)
    out = signature(x=x)
    expected = heads(x)
    assert set(out) == {"probs", "total"}
    for key in out:
        np.testing.assert_allclose(out[key].numpy(), expected[key].numpy(), rtol=1e-5, atol=1e-6)
