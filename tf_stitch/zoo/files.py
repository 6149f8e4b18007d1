"""Zoo entries for models on disk: a SavedModel directory (its serving signature, or its first)
or a `.keras`/`.h5` file, with seeded random inputs of the model's input shapes (a dimension the
model leaves unknown, other than the batch, becomes `profiler.models.UNKNOWN_DIM`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tensorflow as tf

from tf_stitch.profiler.models import UNKNOWN_DIM, random_input
from tf_stitch.zoo.entry import Built, ZooEntry


def is_model_file(spec: str) -> bool:
    path = Path(spec)
    saved = path.is_dir() and (path / "saved_model.pb").is_file()
    return saved or (path.is_file() and path.suffix in (".keras", ".h5"))


def _inputs(specs: list[tuple[Any, tf.DType]]) -> Any:
    def make(batch: int, seed: int) -> list[tf.Tensor]:
        return [random_input(s, d, batch, seed + i) for i, (s, d) in enumerate(specs)]

    return make


def _saved_model(path: Path) -> tuple[Any, list[tuple[Any, tf.DType]]]:
    loaded = tf.saved_model.load(str(path))
    signatures = dict(loaded.signatures)
    if not signatures:
        raise ValueError(f"the SavedModel {path} has no signatures")
    fn = signatures["serving_default" if "serving_default" in signatures else sorted(signatures)[0]]
    specs = fn.structured_input_signature[1]
    names = sorted(specs)

    def call(*xs: Any) -> Any:
        return fn(**dict(zip(names, xs, strict=True)))

    call.loaded = loaded  # type: ignore[attr-defined]  # keeps the variables alive
    return call, [(specs[n].shape, specs[n].dtype) for n in names]


def _keras(path: Path) -> tuple[Any, list[tuple[Any, tf.DType]]]:
    import keras

    model = keras.models.load_model(path, compile=False)
    return model, [(t.shape, tf.as_dtype(t.dtype)) for t in model.inputs]


def file_entry(spec: str) -> ZooEntry:
    """The zoo entry of a SavedModel directory or a Keras file (see the module doc)."""
    path = Path(spec)
    load = _saved_model if path.is_dir() else _keras
    _, specs = load(path)  # its input shapes, now: a bad file fails before any process runs
    shapes = tuple(
        tuple(UNKNOWN_DIM if d is None else int(d) for d in list(s)[1:]) for s, _ in specs
    )

    def build(seed: int) -> Built:
        model, model_specs = load(path)
        return Built(model, _inputs(model_specs))

    return ZooEntry(
        path.name or spec,
        "file",
        f"{'SavedModel' if path.is_dir() else 'Keras file'} {path}",
        shapes,
        tuple(d.name for _, d in specs),
        1,
        build,
    )
