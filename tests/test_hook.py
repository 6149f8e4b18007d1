"""tf_stitch.enable(): TensorFlow's own graph optimization stitches every function it
instantiates (runtime/op/graph_pass.cc, hook.py), with TensorFlow's answers, variables live, the
result cached by the graph's bytes; jit_compile functions and failures stay TensorFlow's."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_stitch
from tf_stitch import hook
from tf_stitch.launches.op_launches import count_tf_launches

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _off_after() -> Iterator[None]:
    yield
    tf_stitch.disable()


def _layer(x: tf.Tensor) -> tf.Tensor:
    return tf.nn.softmax(tf.nn.relu(x * 2.0 + 1.0) * 0.5)


def _stitched_per_step(fn: object, *inputs: object) -> int:
    return count_tf_launches(fn, inputs).by_type.get("StitchedKernel", 0)


def test_enable_disable_and_the_scope() -> None:
    assert not tf_stitch.is_enabled()
    tf_stitch.enable()
    assert tf_stitch.is_enabled()
    with hook.paused():
        assert not tf_stitch.is_enabled()
    assert tf_stitch.is_enabled()
    tf_stitch.disable()
    tf_stitch.disable()  # idempotent
    with tf_stitch.enabled():
        assert tf_stitch.is_enabled()
    assert not tf_stitch.is_enabled()


def test_bad_arguments_are_clear_errors() -> None:
    with pytest.raises(TypeError, match="cuda"):
        tf_stitch.enable(cuda="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on_chip_budget"):
        tf_stitch.enable(on_chip_budget=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_chip_budget"):
        tf_stitch.enable(on_chip_budget=-1)
    assert not tf_stitch.is_enabled()


def test_a_tf_function_runs_stitched_kernels_with_tensorflow_answers() -> None:
    x = tf.random.normal([32, 64], seed=1)
    v = tf.Variable(tf.random.normal([64], seed=2))

    def step(x: tf.Tensor) -> tf.Tensor:
        v.assign_add(tf.reduce_mean(x, 0))
        return _layer(x + v)

    expected = tf.function(step)(x).numpy()
    v_expected = v.numpy()
    v.assign(v_expected - tf.reduce_mean(x, 0).numpy())
    assert _stitched_per_step(tf.function(_layer), x) == 0
    tf_stitch.enable()
    got = tf.function(step)(x).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(v.numpy(), v_expected, rtol=1e-6)  # the write happened once
    assert _stitched_per_step(tf.function(_layer), x) >= 1
    assert hook.stats().rewritten >= 2


def test_a_second_instantiation_of_the_same_graph_is_a_cache_hit() -> None:
    x = tf.random.normal([16, 32], seed=3)
    tf_stitch.enable()
    tf.function(_layer)(x)
    first = hook.stats()
    tf.function(_layer)(x)  # traced and instantiated anew: the same GraphDef
    second = hook.stats()
    assert second.cache_hits == first.cache_hits + 1
    assert second.rewritten == first.rewritten
    assert second.seconds == first.seconds  # no optimizer time spent


def test_jit_compile_functions_stay_xla_s() -> None:
    x = tf.random.normal([8, 16], seed=4)
    tf_stitch.enable()
    before = hook.stats().rewritten
    got = tf.function(_layer, jit_compile=True)(x)
    np.testing.assert_allclose(got.numpy(), _layer(x).numpy(), rtol=1e-5, atol=1e-6)
    assert hook.stats().rewritten == before


def test_a_graph_the_optimizer_fails_on_stays_tensorflow_s_with_one_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: object, **kwargs: object) -> bytes:
        raise ValueError("no such luck")

    monkeypatch.setattr(hook, "rewrite_function_graph", broken)
    x = tf.random.normal([8, 16], seed=5)
    tf_stitch.enable(on_chip_budget=12345)  # settings no other test uses: a fresh cache key
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = tf.function(_layer)(x)
    np.testing.assert_allclose(got.numpy(), _layer(x).numpy(), rtol=1e-6)
    messages = [str(w.message) for w in caught if "no such luck" in str(w.message)]
    assert len(messages) == 1, messages
    assert "unoptimized" in messages[0]


def test_count_launches_reports_tensorflow_with_the_pass() -> None:
    x = tf.random.normal([32, 64], seed=6)
    tf_stitch.enable()
    report = tf_stitch.count_launches(_layer, x)
    assert report.tf >= 4  # TensorFlow's own graph, counted with the pass paused
    assert report.tf_enabled is not None and report.tf_enabled <= 2
    assert report.tf_enabled_detail is not None
    assert report.tf_enabled_detail.by_type.get("StitchedKernel", 0) >= 1
    assert "TensorFlow with tf_stitch.enable()" in str(report)
    assert tf_stitch.is_enabled()


def _cnn() -> keras.Model:
    keras.utils.set_random_seed(1)
    model = keras.Sequential(
        [
            keras.layers.Input((28, 28, 1)),
            keras.layers.Conv2D(8, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dropout(0.5),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def _text_classifier() -> keras.Model:
    keras.utils.set_random_seed(2)
    model = keras.Sequential(
        [
            keras.layers.Input((16,), dtype="int64"),
            keras.layers.Embedding(64, 16),
            keras.layers.Dropout(0.2),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    model.compile(optimizer="adam", loss="binary_crossentropy")
    return model


def _predict_fit_predict(make: object, x: np.ndarray, y: np.ndarray, on: bool) -> tuple:
    model = make()  # type: ignore[operator]
    if on:
        tf_stitch.enable()
    before = model.predict(x, batch_size=16, verbose=0)
    losses = model.fit(x, y, batch_size=16, epochs=2, verbose=0).history["loss"]
    after = model.predict(x, batch_size=16, verbose=0)
    stats = hook.stats()
    tf_stitch.disable()
    return before, losses, after, [w.numpy() for w in model.weights], stats


@pytest.mark.parametrize("which", ["mnist_cnn", "text_classifier"])
def test_keras_predict_and_fit_are_stitched_with_tensorflow_answers(which: str) -> None:
    rng = np.random.default_rng(0)
    if which == "mnist_cnn":
        make, x = _cnn, rng.random((32, 28, 28, 1), dtype=np.float32)
        y = rng.integers(0, 10, 32)
    else:
        make, x = _text_classifier, rng.integers(0, 64, (32, 16))
        y = rng.integers(0, 2, 32).astype("float32")
    tf_before, tf_losses, tf_after, tf_weights, _ = _predict_fit_predict(make, x, y, False)
    rewritten = hook.stats().rewritten
    before, losses, after, weights, stats = _predict_fit_predict(make, x, y, True)
    assert stats.rewritten >= rewritten + 2  # the predict and the training step
    np.testing.assert_allclose(before, tf_before, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(losses, tf_losses, rtol=1e-5)
    np.testing.assert_allclose(after, tf_after, rtol=1e-4, atol=1e-5)
    for w, expected in zip(weights, tf_weights, strict=True):
        np.testing.assert_allclose(w, expected, rtol=1e-4, atol=1e-5)


def _run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


SCRIPT = """
import sys
import tensorflow as tf
from tf_stitch.launches.op_launches import count_tf_launches
f = tf.function(lambda x: tf.nn.softmax(tf.nn.relu(x * 2.0 + 1.0) * 0.5))
print(sys.argv[1:], count_tf_launches(f, tf.ones([8, 16])).by_type.get("StitchedKernel", 0))
"""


def test_tf_stitch_run_and_the_environment_variable(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    cli = [sys.executable, "-m", "tf_stitch.cli"]
    done = _run([*cli, "run", str(script), "a", "--b"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "['a', '--b'] 1"
    plain = _run([sys.executable, str(script)])
    assert plain.stdout.strip().endswith("] 0"), plain.stderr[-3000:]
    code = "import tf_stitch\n" + SCRIPT
    by_env = _run([sys.executable, "-c", code], {"TF_STITCH": "1"})
    assert by_env.stdout.strip() == "[] 1", by_env.stderr[-3000:]
    missing = _run([*cli, "run", str(tmp_path / "nope.py")])
    assert missing.returncode == 2 and "no such file" in missing.stderr
    script.write_text("raise SystemExit(3)")
    assert _run([*cli, "run", str(script)]).returncode == 3
    script.write_text("raise RuntimeError('boom')")
    failed = _run([*cli, "run", str(script)])
    assert failed.returncode == 1 and "boom" in failed.stderr


def test_a_rewrite_tensorflow_would_refuse_to_run_is_not_handed_to_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reads of variables inside a lowered loop given their shapes (through Enter) let the
    passes move work on them out of the loop's frame: a graph TensorFlow's executor refuses
    ("has inputs from different frames") only when it runs it. graph/frames.py catches it
    first, and the graph stays TensorFlow's, with a warning."""
    from tf_stitch.graph import function_bodies

    monkeypatch.setattr(function_bodies, "PASS_THROUGH", frozenset({"Identity", "Enter"}))
    keras.utils.set_random_seed(3)
    model = keras.Sequential(
        [
            keras.layers.Input((6, 4)),
            keras.layers.Bidirectional(keras.layers.LSTM(8)),
            keras.layers.Dense(1),
        ]
    )
    x = np.random.default_rng(0).random((8, 6, 4), dtype=np.float32)
    expected = model(x).numpy()  # eagerly: predict's function is instantiated below
    tf_stitch.enable(on_chip_budget=54321)  # settings no other test uses: a fresh cache key
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = model.predict(x, verbose=0)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    refused = [w for w in caught if "not well formed" in str(w.message)]
    assert refused, [str(w.message) for w in caught]
    assert "different frames" in str(refused[0].message)
