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

from benchmarks.model_builders import bilstm, calibrate_batch_norm, dlrm, trained_like


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


def test_calibrated_batch_norm_normalizes_what_it_sees_and_restores_the_layers() -> None:
    keras.utils.set_random_seed(0)
    inp = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(16, 3)(inp)
    x = keras.layers.Dropout(0.5)(x)
    bn = keras.layers.BatchNormalization(momentum=0.9)
    inner = keras.Sequential([keras.layers.Conv2D(8, 1), keras.layers.BatchNormalization()])
    model = keras.Model(inp, inner(bn(x)))
    trained_like(model, 1)
    make = lambda seed: tf.random.stateless_normal([4, 8, 8, 3], [seed, 0], 3.0, 5.0)  # noqa: E731
    assert calibrate_batch_norm(model, [make(1)]) == 2  # the nested one too
    assert bn.momentum == 0.9 and model.layers[2].rate == 0.5
    probe = keras.Model(inp, [bn.output, model.output])
    norms = (bn, inner.layers[1])
    for seed, tol in ((1, 1e-3), (2, 0.5)):  # the calibration batch, then another one
        for y, norm in zip(probe(make(seed), training=False), norms, strict=True):
            flat = y.numpy().reshape(-1, y.shape[-1])
            z = (flat - norm.beta.numpy()) / norm.gamma.numpy()
            np.testing.assert_allclose(z.mean(0), 0.0, atol=tol)
            np.testing.assert_allclose(z.std(0), 1.0, atol=tol)
    dense = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    assert calibrate_batch_norm(dense, [make(1)[:, 0, 0]]) == 0


@pytest.mark.parametrize("build", [dlrm, bilstm])
def test_models_build_and_run(build: object) -> None:
    kwargs = {"batch": 2, "tables": 3, "vocab": 50} if build is dlrm else {"length": 7}
    model = build(0, False, **kwargs)  # type: ignore[operator]
    fn = tf.function(model.fn, input_signature=model.signature)
    out = tf.nest.flatten(fn(*model.inputs))
    assert all(np.all(np.isfinite(o.numpy())) for o in out)
    assert out[0].shape[0] == model.inputs[0].shape[0]
