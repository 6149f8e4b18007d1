"""`tf-stitch profile` on a Keras file, a SavedModel and a workload name, and its errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf

from tf_stitch import cli
from tf_stitch.profiler.models import load_for_profiling, random_input
from tf_stitch.profiler.store.profile import STORE_DIR


def _keras_file(tmp_path: Path) -> Path:
    import keras

    keras.utils.set_random_seed(0)
    inp = keras.Input((16,))
    out = keras.layers.Dense(8, activation="relu", name="hidden")(inp)
    out = keras.layers.LayerNormalization(name="norm")(out)  # something to stitch
    model = keras.Model(inp, keras.layers.Dense(2, name="out")(out), name="tiny")
    path = tmp_path / "tiny.keras"
    model.save(path)
    return path


def test_profile_a_keras_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _keras_file(tmp_path)
    logdir = tmp_path / "logs"
    argv = [
        "profile",
        str(path),
        "--batch",
        "4",
        "--steps",
        "4",
        "--warmup",
        "1",
        "--logdir",
        str(logdir),
        "--run-name",
        "tiny",
    ]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "tiny: " in out and "ms per step" in out and "hidden" in out
    assert (logdir / STORE_DIR / "tiny" / "meta.json").is_file()
    assert cli.main(["profile", str(path), "--steps", "3", "--warmup", "1", "--optimize"]) == 0
    out = capsys.readouterr().out
    assert "tiny (tf_stitch): " in out and "kernel tracing" in out


def test_a_saved_model_and_a_workload_get_random_inputs(tmp_path: Path) -> None:
    class Scale(tf.Module):
        @tf.function(
            input_signature=[
                tf.TensorSpec([None, 3], tf.float32, name="x"),
                tf.TensorSpec([None], tf.int32, name="ids"),
            ]
        )
        def serve(self, x: tf.Tensor, ids: tf.Tensor) -> dict[str, tf.Tensor]:
            return {"y": x * 2.0, "n": ids + 1}

    module = Scale()
    tf.saved_model.save(module, str(tmp_path / "sm"), signatures={"serving_default": module.serve})
    fn, inputs, name = load_for_profiling(str(tmp_path / "sm"), batch=5)
    assert name == "sm:serving_default"
    assert [tuple(t.shape) for t in inputs] == [(5,), (5, 3)]  # ids, x: sorted by name
    out = fn(*inputs)
    assert set(out) == {"y", "n"}
    fn, inputs, name = load_for_profiling("lr", batch=3)
    assert name == "lr" and inputs[0].shape[0] == 3


def test_bad_models_and_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["profile", str(tmp_path / "missing.keras")]) == 2
    assert "is not a .keras/.h5 file, a SavedModel directory, or a built-in workload" in (
        capsys.readouterr().err
    )
    with pytest.raises(ValueError, match="at least 1"):
        load_for_profiling("lr", batch=0)
    with pytest.raises(ValueError, match="string"):
        random_input([2], tf.string, 2, 0)
    assert random_input([None, None], tf.float32, 4, 0).shape == (4, 16)
