"""benchmarks/model_builders.py: the real models build offline from configuration, their
weights are redrawn only where Keras left one repeated value, and they run."""

from __future__ import annotations

import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.model_builders import bilstm, dlrm, trained_like


def test_trained_like_redraws_only_constant_float_weights() -> None:
    keras.utils.set_random_seed(0)
    inp = keras.Input((4, 4, 3))
    x = keras.layers.Conv2D(8, 3)(inp)
    x = keras.layers.BatchNormalization()(x)
    model = keras.Model(inp, keras.layers.Dense(2)(keras.layers.Flatten()(x)))
    before = {v.path: np.array(v.numpy()) for v in model.weights}
    # conv bias, gamma, beta, moving mean, moving variance, dense bias
    assert trained_like(model, 1) == 6
    for v in model.weights:
        old, new = before[v.path], np.asarray(v.numpy())
        if np.all(old == old.flat[0]):
            assert not np.all(new == new.flat[0])
            if "variance" in v.path or "gamma" in v.path:
                assert np.all(new > 0)
        else:
            np.testing.assert_array_equal(old, new)  # drawn kernels are kept


@pytest.mark.parametrize("build", [dlrm, bilstm])
def test_models_build_and_run(build: object) -> None:
    kwargs = {"batch": 2, "tables": 3, "vocab": 50} if build is dlrm else {"length": 7}
    model = build(0, False, **kwargs)  # type: ignore[operator]
    fn = tf.function(model.fn, input_signature=model.signature)
    out = tf.nest.flatten(fn(*model.inputs))
    assert all(np.all(np.isfinite(o.numpy())) for o in out)
    assert out[0].shape[0] == model.inputs[0].shape[0]
