"""What `tf-stitch profile MODEL` profiles: a Keras file, a SavedModel or a built-in workload,
with seeded random inputs of the model's input shapes (the batch given, or the model's)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tensorflow as tf

DEFAULT_BATCH = 1
UNKNOWN_DIM = 16  # a non-batch dimension the model leaves unknown


def random_input(shape: Sequence[int | None], dtype: tf.DType, batch: int, seed: int) -> Any:
    """A seeded random tensor: normal floats, integers in [0, 100), False booleans."""
    dims = [
        batch if i == 0 and d is None else (UNKNOWN_DIM if d is None else int(d))
        for i, d in enumerate(shape)
    ]
    if batch and dims:
        dims[0] = batch
    if dtype.is_floating:
        return tf.cast(tf.random.stateless_normal(dims, seed=[seed, 1]), dtype)
    if dtype.is_integer:
        return tf.random.stateless_uniform(dims, [seed, 2], 0, 100, dtype=dtype)
    if dtype == tf.bool:
        return tf.zeros(dims, tf.bool)
    raise ValueError(f"cannot make a random input of dtype {dtype.name}")


def _keras_file(path: Path, batch: int | None) -> tuple[Any, list[Any], str]:
    import keras

    model = keras.models.load_model(path, compile=False)
    b = batch or DEFAULT_BATCH
    inputs = [random_input(t.shape, tf.as_dtype(t.dtype), b, i) for i, t in enumerate(model.inputs)]
    return model, inputs, model.name


def _saved_model(path: Path, batch: int | None) -> tuple[Any, list[Any], str]:
    loaded = tf.saved_model.load(str(path))
    signatures = dict(loaded.signatures)
    if not signatures:
        raise ValueError(f"the SavedModel {path} has no signatures to profile")
    key = "serving_default" if "serving_default" in signatures else sorted(signatures)[0]
    fn = signatures[key]
    specs = fn.structured_input_signature[1]
    names = sorted(specs)
    b = batch or DEFAULT_BATCH
    inputs = [random_input(specs[n].shape, specs[n].dtype, b, i) for i, n in enumerate(names)]

    def call(*xs: Any) -> Any:
        return fn(**dict(zip(names, xs, strict=True)))

    return call, inputs, f"{path.name}:{key}"


def _workload(name: str, batch: int | None) -> tuple[Any, list[Any], str]:
    from tf_stitch.workloads import WORKLOADS

    module = WORKLOADS[name]
    w = module.build(batch or module.BATCH)
    return w.fn, w.inputs, name


def load_for_profiling(spec: str, batch: int | None = None) -> tuple[Any, list[Any], str]:
    """(model or function, inputs, name) for a `.keras`/`.h5` file, a SavedModel directory or
    a workload name; ValueError saying which of these `spec` is not."""
    from tf_stitch.workloads import WORKLOADS

    if batch is not None and batch < 1:
        raise ValueError("the batch size must be at least 1")
    path = Path(spec)
    if path.is_dir() and (path / "saved_model.pb").is_file():
        return _saved_model(path, batch)
    if path.is_file() and path.suffix in (".keras", ".h5"):
        return _keras_file(path, batch)
    if spec in WORKLOADS:
        return _workload(spec, batch)
    raise ValueError(
        f"{spec!r} is not a .keras/.h5 file, a SavedModel directory, or a built-in workload "
        f"({', '.join(WORKLOADS)})"
    )
