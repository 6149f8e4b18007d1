"""The benchmark workloads build, trace, run (finite, deterministic), accept another batch size
where the batch is None, and compile with XLA:CPU; small shapes throughout."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

from tf_stitch.workloads import WORKLOADS, Workload, get

ORDER = [
    "lr",
    "w2v",
    "rnn",
    "birnn",
    "nmt",
    "speech",
    "bert",
    "transformer_decoder",
    "dien",
    "crnn",
]


def _flat(x: Any) -> list[np.ndarray]:
    return [np.asarray(t) for t in tf.nest.flatten(x)]


def _weights(model: Any) -> list[np.ndarray]:
    out = []
    for obj in tf.nest.flatten(model):
        for w in getattr(obj, "weights", [obj]):
            out.append(np.asarray(w))
    return out


def _has_batch_dim(w: Workload) -> bool:
    return any(s.shape.rank and s.shape[0] is None for s in w.input_signature)


def test_registry_lists_the_ten_workloads_in_order() -> None:
    assert list(WORKLOADS) == ORDER
    for name, module in WORKLOADS.items():
        assert get(name) is module
        assert name == module.NAME
        assert isinstance(module.DESCRIPTION, str) and "\n" not in module.DESCRIPTION
        assert isinstance(module.BATCH, int) and module.BATCH > 0
        params = inspect.signature(module.build).parameters
        assert params["batch"].default == module.BATCH
        assert params["small"].default is False
        assert len(Path(str(module.__file__)).read_text().splitlines()) < 150
    with pytest.raises(KeyError, match="unknown workload"):
        get("nope")


@pytest.mark.parametrize("name", ORDER)
def test_workload_runs_and_compiles(name: str) -> None:
    module = get(name)
    w = module.build(batch=2, small=True)
    assert isinstance(w, Workload) and w.name == name
    assert len(w.inputs) == len(w.input_signature)
    for spec, x in zip(w.input_signature, w.inputs, strict=True):
        assert spec.is_compatible_with(x), (spec, x.shape, x.dtype)
        assert x.shape[0] == 2 or spec.shape[0] is not None

    graph_fn = tf.function(w.fn, input_signature=w.input_signature)
    y = _flat(graph_fn(*w.inputs))
    assert y and all(t.dtype == np.float32 for t in y)
    assert all(np.isfinite(t).all() for t in y)

    # Deterministic: the same inputs and weights for the same seed, the same result each call.
    for a, b in zip(w.make_inputs(2), w.inputs, strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(_flat(graph_fn(*w.inputs)), y, strict=True):
        np.testing.assert_array_equal(a, b)
    again = module.build(batch=2, small=True)
    wa, wb = _weights(w.model), _weights(again.model)
    assert wa and len(wa) == len(wb)
    for a, b in zip(wa, wb, strict=True):
        np.testing.assert_array_equal(a, b)

    # Another batch size through the same trace.
    if _has_batch_dim(w):
        y3 = _flat(graph_fn(*w.make_inputs(3)))
        assert all(t.shape[0] == 3 for t in y3), [t.shape for t in y3]
        assert all(np.isfinite(t).all() for t in y3)

    # XLA:CPU compiles it, and agrees (the rebuilt model has the same weights).
    xla = _flat(tf.function(again.fn, jit_compile=True)(*again.inputs))
    for a, b in zip(xla, y, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
