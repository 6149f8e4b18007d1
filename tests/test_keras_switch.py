"""tf_stitch.stitch(model): Keras' fit, evaluate and predict through stitched steps give plain
Keras' loss history, metrics and predictions (issue 21)."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_stitch
from tf_stitch.keras_switch import is_stitched


def _model() -> keras.Model:
    keras.utils.set_random_seed(0)
    inp = keras.Input((10, 6))
    h = keras.layers.LSTM(8, return_sequences=True)(inp)
    h = keras.layers.LayerNormalization()(keras.layers.Dense(12, activation="gelu")(h))
    h = keras.layers.Dropout(0.2)(keras.layers.GlobalAveragePooling1D()(h))
    model = keras.Model(inp, keras.layers.Dense(1)(h))
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse", metrics=["mae"])
    return model


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((70, 10, 6)).astype(np.float32)
    return x, x.sum(axis=(1, 2))[:, None] / 4.0


def _run(stitched: bool) -> tuple[Any, Any, Any, keras.Model]:
    model = _model()
    if stitched:
        assert tf_stitch.stitch(model) is model and is_stitched(model)
    x, y = _data()
    # 70 samples in batches of 16: the last batch of each epoch (6) is a second signature
    history = model.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=False)
    evaluated = model.evaluate(x, y, batch_size=32, verbose=0)
    predicted = model.predict(x, batch_size=32, verbose=0)
    return history.history, evaluated, predicted, model


def test_fit_evaluate_and_predict_match_plain_keras() -> None:
    (h_tf, e_tf, p_tf, _), (h_ts, e_ts, p_ts, model) = _run(False), _run(True)
    assert h_tf["loss"][1] < h_tf["loss"][0]  # it learns
    for key in h_tf:
        np.testing.assert_allclose(h_ts[key], h_tf[key], rtol=1e-4)
    np.testing.assert_allclose(e_ts, e_tf, rtol=1e-4)
    np.testing.assert_allclose(p_ts, p_tf, rtol=1e-4, atol=1e-5)
    train = model.train_function.stitched
    optimized = list(train._cache.values())
    assert len(optimized) == 2  # the full and the last batch
    assert all(o.kernels for _, o in optimized)  # the training steps were stitched


def test_unstitch_gives_keras_its_own_functions_back() -> None:
    model = tf_stitch.unstitch(tf_stitch.stitch(_model()))
    assert not is_stitched(model)
    x, y = _data()
    model.fit(x[:16], y[:16], batch_size=16, epochs=1, verbose=0)
    assert not hasattr(model.train_function, "stitched")


def test_what_the_switch_refuses() -> None:
    with pytest.raises(TypeError, match=r"expects a keras\.Model"):
        tf_stitch.stitch(tf.function(lambda x: x))
    model = _model()
    model.compile(optimizer="sgd", loss="mse", run_eagerly=True)
    tf_stitch.stitch(model)
    x, y = _data()
    with pytest.raises(ValueError, match="runs eagerly"):
        model.fit(x[:16], y[:16], verbose=0)
