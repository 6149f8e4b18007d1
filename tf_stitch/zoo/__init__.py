"""The model zoo the characterization runs: every `keras.applications` architecture,
transformer encoders and decoders built from configuration, recurrent and classic networks, and
the fusion workloads — all built locally with seeded random weights, nothing downloaded.

`zoo()` is the ordered registry (name -> `ZooEntry`); `get(spec)` finds an entry by name, reads a
SavedModel directory or a Keras file, or imports `package.module:function` (a function returning
a `ZooEntry`): how to characterize models of one's own.
"""

from __future__ import annotations

import functools
import importlib

from tf_stitch.zoo.entry import Built, ZooEntry, keras_entry, random_inputs


@functools.cache
def zoo() -> dict[str, ZooEntry]:
    """Every model of the zoo, by name, in a fixed order."""
    from tf_stitch.zoo import keras_apps, recurrent, transformers, workloads

    entries = [
        *keras_apps.entries(),
        *transformers.entries(),
        *recurrent.entries(),
        *workloads.entries(),
    ]
    return {e.name: e for e in entries}


def is_custom(spec: str) -> bool:
    """A spec that is not a zoo name: `module:function` or a model file or directory."""
    from tf_stitch.zoo.files import is_model_file

    return ":" in spec or is_model_file(spec)


def get(spec: str) -> ZooEntry:
    """The zoo entry `spec` names, or the `ZooEntry` that `module:function()` returns;
    ValueError saying what is wrong otherwise. A SavedModel directory or a `.keras`/`.h5` file
    is an entry of its own (`zoo/files.py`)."""
    from tf_stitch.zoo.files import file_entry, is_model_file

    if is_model_file(spec):
        return file_entry(spec)
    if is_custom(spec):
        module_name, _, attr = spec.partition(":")
        try:
            entry = getattr(importlib.import_module(module_name), attr)()
        except (ImportError, AttributeError) as e:
            raise ValueError(f"cannot load the model {spec!r}: {e}") from None
        if not isinstance(entry, ZooEntry):
            raise ValueError(f"{spec} returned a {type(entry).__name__}, not a ZooEntry")
        return entry
    try:
        return zoo()[spec]
    except KeyError:
        raise ValueError(
            f"unknown model {spec!r}; `tf-stitch zoo list` lists the {len(zoo())} models"
        ) from None


__all__ = ["Built", "ZooEntry", "get", "is_custom", "keras_entry", "random_inputs", "zoo"]
