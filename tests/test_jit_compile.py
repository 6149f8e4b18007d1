"""Stitched functions inside jit_compile=True functions: XLA cannot call tf_stitch's kernels,
so an optimized function run there runs its original ops (XLA fuses them), with one warning;
a frozen one, whose original would read other values, is refused clearly."""

from __future__ import annotations

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_stitch


def _model() -> keras.Model:
    keras.utils.set_random_seed(0)
    return keras.Sequential(
        [
            keras.layers.Input((16,)),
            keras.layers.Dense(32, activation="gelu"),
            keras.layers.LayerNormalization(),
        ]
    )


def test_an_optimized_function_inside_jit_compile_runs_its_original_ops() -> None:
    model = _model()
    optimized = tf_stitch.optimize(model, input_signature=[tf.TensorSpec([None, 16])])
    jitted = tf.function(lambda x: optimized(x) * 2.0, jit_compile=True)
    x = tf.random.normal([8, 16], seed=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = jitted(x)
        jitted(tf.random.normal([4, 16], seed=2))  # a second trace: no second warning
    np.testing.assert_allclose(got.numpy(), model(x).numpy() * 2.0, rtol=1e-5, atol=1e-5)
    messages = [str(w.message) for w in caught if "jit_compile" in str(w.message)]
    assert len(messages) == 1 and "original ops" in messages[0]
    hlo = jitted.experimental_get_compiler_ir(x)(stage="hlo")
    assert "StitchedKernel" not in hlo and "custom-call" not in hlo
    # Outside XLA the same object still runs its stitched kernels.
    assert tf_stitch.count_launches(optimized, x).tf_stitch_detail.by_type["StitchedKernel"] >= 1


def test_a_frozen_optimized_function_is_refused_inside_jit_compile() -> None:
    frozen = tf_stitch.optimize(_model(), input_signature=[tf.TensorSpec([None, 16])], freeze=True)
    with pytest.raises(ValueError, match="frozen"):
        tf.function(lambda x: frozen(x), jit_compile=True)(tf.ones([2, 16]))


def test_a_stitch_function_inside_jit_compile_is_xla_s() -> None:
    stitched = tf_stitch.function(lambda x: tf.nn.relu(x * 2.0 + 1.0) * 3.0)
    x = tf.random.normal([8, 16], seed=3)
    got = tf.function(lambda x: stitched(x), jit_compile=True)(x)
    np.testing.assert_allclose(got.numpy(), (tf.nn.relu(x * 2.0 + 1.0) * 3.0).numpy(), rtol=1e-6)
    assert not stitched._cache  # nothing was optimized for XLA's trace
