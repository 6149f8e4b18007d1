"""Checks what a conversion is given before anything is loaded or written: the SavedModel
directory, the signature keys, the input shapes and the output directory."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import tensorflow as tf


class ConversionError(ValueError):
    """A conversion cannot be done as asked; the message says why and what to do."""


def check_saved_model_dir(path: Any) -> str:
    """`path` as a string if it is a SavedModel directory (`saved_model.pb` or `.pbtxt`)."""
    if not isinstance(path, str | os.PathLike):
        raise ConversionError(f"a SavedModel directory is a path, got {type(path).__name__}")
    text = os.fspath(path)
    if not tf.io.gfile.isdir(text):
        what = "a file" if tf.io.gfile.exists(text) else "missing"
        raise ConversionError(f"{text} is not a SavedModel directory: it is {what}")
    if not any(
        tf.io.gfile.exists(os.path.join(text, name))
        for name in ("saved_model.pb", "saved_model.pbtxt")
    ):
        raise ConversionError(
            f"{text} is not a SavedModel directory: it has no saved_model.pb (a Keras model is "
            "exported with model.export(dir), a tf.Module with tf.saved_model.save)"
        )
    return text


def check_signature_keys(
    requested: Sequence[str] | str | None, available: Sequence[str]
) -> list[str]:
    """The signature keys to convert: all of `available` if `requested` is None."""
    if not available:
        raise ConversionError("the SavedModel has no signatures to convert")
    if requested is None:
        return list(available)
    keys = [requested] if isinstance(requested, str) else list(requested)
    if not keys:
        raise ConversionError("signature_keys is empty; pass None to convert every signature")
    missing = [k for k in keys if k not in available]
    if missing:
        raise ConversionError(
            f"the SavedModel has no signature {', '.join(map(repr, missing))}; "
            f"it has {', '.join(map(repr, available))}"
        )
    return list(dict.fromkeys(keys))


def parse_shape_flag(text: str) -> tuple[str, list[int | None]]:
    """`NAME=1,128` (a dim may be `?` or `-1` for unknown, `NAME=` for a scalar) for the CLI."""
    name, sep, dims = text.partition("=")
    if not sep or not name:
        raise ConversionError(f"--input-shape takes NAME=D1,D2,... (e.g. x=1,128), got {text!r}")
    shape: list[int | None] = []
    for part in filter(None, (d.strip() for d in dims.split(","))):
        if part in ("?", "-1", "None"):
            shape.append(None)
            continue
        try:
            value = int(part)
        except ValueError:
            raise ConversionError(f"--input-shape {text!r}: {part!r} is not a size") from None
        if value < 0:
            raise ConversionError(f"--input-shape {text!r}: a size is >= 0 (or ? for unknown)")
        shape.append(value)
    return name, shape


def check_input_shapes(
    shapes: Mapping[str, Any] | None, specs_by_key: Mapping[str, Mapping[str, tf.TensorSpec]]
) -> dict[str, tf.TensorShape]:
    """The input shapes by input name, each checked to be an input of a converted signature and
    compatible with its declared shape."""
    if not shapes:
        return {}
    if not isinstance(shapes, Mapping):
        raise ConversionError(
            "input_shapes maps input names to shapes, e.g. {'x': [1, 128]}, got "
            f"{type(shapes).__name__}"
        )
    known = {name: spec for specs in specs_by_key.values() for name, spec in specs.items()}
    out: dict[str, tf.TensorShape] = {}
    for name, value in shapes.items():
        if name not in known:
            raise ConversionError(
                f"input_shapes names {name!r}, which is not an input of the converted "
                f"signatures; their inputs are {', '.join(map(repr, sorted(known)))}"
            )
        try:
            shape = tf.TensorShape(value)
        except (TypeError, ValueError) as e:
            raise ConversionError(
                f"input_shapes[{name!r}] = {value!r} is not a shape: {e}"
            ) from None
        declared = known[name].shape
        if not declared.is_compatible_with(shape):
            raise ConversionError(
                f"input_shapes[{name!r}] = {shape} does not fit the input's declared shape "
                f"{declared}"
            )
        out[name] = declared.merge_with(shape)
    return out


def check_output_dir(path: Any, overwrite: bool) -> Path:
    """`path` as a Path if it may be written: absent, an empty directory, or (`overwrite`) a
    directory. Nothing is written here."""
    if not isinstance(path, str | os.PathLike):
        raise ConversionError(f"the output directory is a path, got {type(path).__name__}")
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ConversionError(f"{out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise ConversionError(
            f"{out} exists and is not empty; choose another directory or pass overwrite=True "
            "(--overwrite)"
        )
    return out
