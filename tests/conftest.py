"""Shared test helpers: random inputs and comparisons against the unoptimized TF graph."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The same TensorFlow on every CPU: oneDNN on, which TensorFlow turns on by itself only on some
# CPUs (not on AMD EPYCs), so that graphs planned for a GPU (NCHW convolutions) run on the host.
# tests/launches/test_report.py checks the other case in a process of its own.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

import tensorflow as tf
from hypothesis import HealthCheck, settings

# Hypothesis profiles: `ci` (the default run) and `long` (`--hypothesis-profile=long`) for the
# tests that leave the number of examples to the profile (tests/reliability/test_fuzz.py).
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile(
    "ci", max_examples=12, deadline=None, database=None, suppress_health_check=_SLOW_OK
)
settings.register_profile("long", max_examples=400, deadline=None, suppress_health_check=_SLOW_OK)


def pytest_configure(config: pytest.Config) -> None:
    # `ci` unless the command line names a profile (hypothesis loads that one itself)
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile("ci")


# float32 tolerances for comparing stitched kernels with TensorFlow's kernels.
RTOL = 1e-5
ATOL = 1e-5


def random_inputs(specs: Sequence[tf.TensorSpec], batch: int = 3, seed: int = 0) -> list[tf.Tensor]:
    """Random tensors for `specs`; unknown dimensions become `batch`."""
    rng = np.random.default_rng(seed)
    out = []
    for spec in specs:
        shape = [batch if d is None else d for d in spec.shape.as_list()]
        if spec.dtype == tf.bool:
            out.append(tf.constant(rng.random(shape) > 0.5))
        else:
            out.append(tf.constant(rng.standard_normal(shape).astype(spec.dtype.as_numpy_dtype)))
    return out


def assert_close(expected: Any, actual: Any, rtol: float = RTOL, atol: float = ATOL) -> None:
    """Same structure, shapes and dtypes; values within tolerance; NaN/Inf in the same places."""
    flat_e = tf.nest.flatten(expected)
    flat_a = tf.nest.flatten(actual)
    assert len(flat_e) == len(flat_a)
    for e, a in zip(flat_e, flat_a, strict=True):
        e, a = np.asarray(e), np.asarray(a)
        assert e.shape == a.shape, (e.shape, a.shape)
        assert e.dtype == a.dtype, (e.dtype, a.dtype)
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)


def assert_same_specials(want: np.ndarray, got: np.ndarray) -> None:
    """NaN in the same places, the same infinities, float32 tolerance (relative to the largest
    finite value) elsewhere."""
    assert want.shape == got.shape and want.dtype == got.dtype
    nan_w, nan_g = np.isnan(want), np.isnan(got)
    assert np.array_equal(nan_w, nan_g), f"NaN at {np.argwhere(nan_w != nan_g)[:5].tolist()}"
    inf = np.isinf(want) | np.isinf(got)
    assert np.array_equal(want[inf], got[inf]), "infinities differ"
    finite = ~(nan_w | inf)
    scale = max(1.0, float(np.max(np.abs(want[finite]), initial=0.0)))
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-5 * scale)


def compare_with_tf(
    fn: Callable[..., Any], optimized: Callable[..., Any], inputs: Sequence[Any], **tol: float
) -> None:
    assert_close(fn(*inputs), optimized(*inputs), **tol)


@pytest.fixture
def kernel_cache(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fresh, private kernel cache for tests that need compilation to really happen."""
    path = tmp_path / "tf_stitch_cache"
    monkeypatch.setenv("TF_STITCH_CACHE_DIR", str(path))
    return path
