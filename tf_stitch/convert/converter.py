"""`tf_stitch.Converter` and `tf_stitch.convert_saved_model`: SavedModel in, stitched
SavedModel out, in the manner of TF-TRT's `TrtGraphConverterV2`.

    converter = tf_stitch.Converter("model/", input_shapes={"x": [1, 128]})
    converter.convert()
    converter.build(lambda: [{"x": np.random.rand(1, 128).astype("float32")}])  # optional
    converter.save("model_stitched/")
    converter.summary()

Every converted signature is frozen and stitched; its StitchedKernel nodes carry their source,
the binary built here and their original ops as a fallback (embed.py, passes/fallback.py), so
the output runs wherever `import tf_stitch` works. Signatures not converted are saved unchanged.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import tensorflow as tf

from tf_stitch.convert.inputs import (
    ConversionError,
    check_input_shapes,
    check_output_dir,
    check_saved_model_dir,
    check_signature_keys,
)
from tf_stitch.convert.signature import (
    ConvertedSignature,
    convert_signature,
    fingerprint,
    input_specs,
)
from tf_stitch.convert.summary import format_summary
from tf_stitch.progress import Progress
from tf_stitch.runtime.cache import replace_dir
from tf_stitch.serving import write_hint

TARGETS = ("cpu", "cuda")
RTOL, ATOL = 1e-4, 1e-5  # float32 after reassociation, on normalized outputs


class Converter:
    """Converts the signatures of a SavedModel into stitched, self-contained ones.

    `signature_keys`: the signatures to convert (default: all; the others are saved unchanged).
    `input_shapes`: shapes by input name that refine the declared ones (e.g. fix the batch);
    the converted signature then accepts only those. `targets`: "cpu" (always: the op's CPU
    kernel) and "cuda" (also a CUDA fatbin per kernel, where nvcc is; without it a warning and
    CPU kernels only). Bad arguments raise ConversionError before anything is converted.
    """

    def __init__(
        self,
        input_saved_model_dir: str | os.PathLike[str],
        signature_keys: Sequence[str] | str | None = None,
        input_shapes: Mapping[str, Any] | None = None,
        *,
        targets: Sequence[str] = TARGETS,
    ) -> None:
        self.input_saved_model_dir = check_saved_model_dir(input_saved_model_dir)
        self.targets = _check_targets(targets)
        try:
            self._loaded = tf.saved_model.load(self.input_saved_model_dir)
        except Exception as e:  # whatever TensorFlow raises, the input is what is wrong
            # (a truncated variables file is an IndexError from the checkpoint reader)
            raise ConversionError(
                f"cannot load the SavedModel {self.input_saved_model_dir} "
                f"({type(e).__name__}: {e}); is it complete (its variables/ too)?"
            ) from None
        available = list(getattr(self._loaded, "signatures", {}).keys())
        self.signature_keys = check_signature_keys(signature_keys, available)
        specs = {k: input_specs(self._loaded.signatures[k]) for k in self.signature_keys}
        self.input_shapes = check_input_shapes(input_shapes, specs)
        self._converted: dict[str, ConvertedSignature] = {}

    # -- convert ----------------------------------------------------------------------------
    def convert(self, progress: TextIO | None = None) -> dict[str, Any]:
        """Converts the signatures; returns the converted ConcreteFunctions by signature key.
        With `progress` (e.g. sys.stderr), a progress bar is drawn there."""
        bar = Progress(len(self.signature_keys), progress, "converting") if progress else None
        first_of: dict[bytes, str] = {}
        for i, key in enumerate(self.signature_keys):
            if bar is not None:
                bar.update(i, key)
            concrete = self._loaded.signatures[key]
            same = first_of.setdefault(fingerprint(concrete), key)
            if same != key:  # converted once, saved once, under both keys
                self._converted[key] = dataclasses.replace(
                    self._converted[same], key=key, original=concrete, shapes_seen=[], same_as=same
                )
                continue
            try:
                self._converted[key] = convert_signature(
                    key, concrete, self.input_shapes, cuda="cuda" in self.targets
                )
            except (ValueError, TypeError, FileNotFoundError, tf.errors.OpError) as e:
                self._converted.clear()
                raise ConversionError(f"signature {key!r} cannot be converted: {e}") from e
        if bar is not None:
            bar.update(len(self.signature_keys))
        for c in self._converted.values():
            for message in c.context.warnings if c.same_as is None else ():
                warnings.warn(f"signature {c.key!r}: {message}", RuntimeWarning, stacklevel=2)
        return {k: c.function for k, c in self._converted.items()}

    @property
    def converted(self) -> dict[str, ConvertedSignature]:
        self._require_converted("converted")
        return dict(self._converted)

    # -- build ------------------------------------------------------------------------------
    def build(self, input_fn: Callable[[], Iterable[Any]]) -> None:
        """Runs every batch `input_fn()` yields through the converted and the original
        signatures and checks that they agree (ConversionError if not). A batch is a dict of
        input name -> array, given to each converted signature that has those inputs, or (with
        one signature converted) a list in its input order. Kernels are compiled for this
        machine as they first run; kernels per step are measured on the first batch."""
        self._require_converted("build")
        if not callable(input_fn):
            raise ConversionError("build() takes a function that returns an iterable of batches")
        batches = 0
        for batch in input_fn():
            matched = self._signatures_for(batch)
            for c, kwargs in matched:
                if c.same_as is not None and any(m.key == c.same_as for m, _ in matched):
                    continue  # the same function, checked under its first key
                _check_outputs(c, kwargs)
                if c.launches is None:
                    c.launches = _launches(c, kwargs)
            batches += 1
        if batches == 0:
            raise ConversionError("input_fn() yielded no batches")

    def _signatures_for(self, batch: Any) -> list[tuple[ConvertedSignature, dict[str, Any]]]:
        if isinstance(batch, Mapping):
            names = set(batch)
            matched = [
                (c, dict(batch)) for c in self._converted.values() if set(c.input_names) == names
            ]
            if not matched:
                raise ConversionError(
                    f"a batch has inputs {sorted(names)}; the converted signatures take "
                    + "; ".join(f"{c.key}: {c.input_names}" for c in self._converted.values())
                )
            return matched
        if isinstance(batch, list | tuple) and len(self._converted) == 1:
            (c,) = self._converted.values()
            if len(batch) != len(c.input_names):
                raise ConversionError(
                    f"a batch has {len(batch)} inputs; signature {c.key!r} takes "
                    f"{len(c.input_names)}: {c.input_names}"
                )
            return [(c, dict(zip(c.input_names, batch, strict=True)))]
        raise ConversionError(
            "a batch is a dict of input name -> array (or, with one signature converted, a list "
            f"of arrays in its input order), got {type(batch).__name__}"
        )

    # -- save -------------------------------------------------------------------------------
    def save(self, output_saved_model_dir: str | os.PathLike[str], overwrite: bool = False) -> Path:
        """Writes the SavedModel: converted signatures plus the others unchanged. It is written
        next to `output_saved_model_dir` and renamed into place, so a failure leaves nothing
        (and an existing directory, with `overwrite`, intact)."""
        self._require_converted("save")
        out = check_output_dir(output_saved_model_dir, overwrite)
        if out.resolve() == Path(self.input_saved_model_dir).resolve():
            raise ConversionError("the output directory is the input SavedModel; choose another")
        signatures = {k: self._loaded.signatures[k] for k in self._loaded.signatures}
        signatures.update({k: c.function for k, c in self._converted.items()})

        def fill(staging: Path) -> None:
            tf.saved_model.save(self._loaded, str(staging), signatures=signatures)
            write_hint(staging)

        return replace_dir(out, fill)

    # -- summary ----------------------------------------------------------------------------
    def summary(self, file: TextIO | None = None) -> str:
        """Prints (and returns) every StitchedKernel: member ops, inputs and outputs with dtypes
        and shapes, schedule and targets, then the totals per signature."""
        self._require_converted("summary")
        text = format_summary(list(self._converted.values()))
        print(text, file=file or sys.stdout)
        return text

    def _require_converted(self, what: str) -> None:
        if not self._converted:
            raise ConversionError(f"call convert() before {what}()")


def convert_saved_model(
    input_saved_model_dir: str | os.PathLike[str],
    output_saved_model_dir: str | os.PathLike[str],
    *,
    signature_keys: Sequence[str] | str | None = None,
    input_shapes: Mapping[str, Any] | None = None,
    targets: Sequence[str] = TARGETS,
    overwrite: bool = False,
    input_fn: Callable[[], Iterable[Any]] | None = None,
) -> Converter:
    """Converts and saves in one call (the output directory is checked first); returns the
    Converter, whose `summary()` tells what was done."""
    check_output_dir(output_saved_model_dir, overwrite)
    converter = Converter(input_saved_model_dir, signature_keys, input_shapes, targets=targets)
    converter.convert()
    if input_fn is not None:
        converter.build(input_fn)
    converter.save(output_saved_model_dir, overwrite=overwrite)
    return converter


def _check_targets(targets: Sequence[str]) -> tuple[str, ...]:
    chosen = (targets,) if isinstance(targets, str) else tuple(targets)
    unknown = [t for t in chosen if t not in TARGETS]
    if unknown or "cpu" not in chosen:
        raise ConversionError(
            f"targets are 'cpu' (required: the op's CPU kernel runs wherever there is no GPU) "
            f"and optionally 'cuda'; got {list(chosen)}"
        )
    return tuple(dict.fromkeys(chosen))


def _check_outputs(c: ConvertedSignature, kwargs: dict[str, Any]) -> None:
    tensors = {}
    for name, value in kwargs.items():
        spec = c.specs[name]
        tensor = tf.convert_to_tensor(value, dtype=spec.dtype)
        if not spec.shape.is_compatible_with(tensor.shape):
            raise ConversionError(
                f"signature {c.key!r}: input {name!r} has shape {tensor.shape}, the converted "
                f"signature takes {spec.shape}"
            )
        tensors[name] = tensor
    c.shapes_seen.append({n: tuple(t.shape) for n, t in tensors.items()})
    want = tf.nest.flatten(c.original(**tensors))
    got = tf.nest.flatten(c.function(**tensors))
    worst = 0.0
    for i, (a, b) in enumerate(zip(want, got, strict=True)):
        x, y = np.asarray(a), np.asarray(b)
        if x.shape != y.shape or x.dtype != y.dtype:
            raise ConversionError(
                f"signature {c.key!r}: output {i} is {y.dtype}{list(y.shape)}, the original "
                f"gives {x.dtype}{list(x.shape)}"
            )
        if not np.issubdtype(x.dtype, np.inexact):
            if not np.array_equal(x, y):
                raise ConversionError(f"signature {c.key!r}: output {i} differs from the original")
            continue
        same_nan = np.array_equal(np.isnan(x), np.isnan(y))
        finite = np.isfinite(x) & np.isfinite(y)
        scale = max(1.0, float(np.max(np.abs(x[finite]), initial=0.0)))
        diff = float(np.max(np.abs(x[finite] - y[finite]), initial=0.0))
        worst = max(worst, diff)
        infs_equal = np.array_equal(x[~np.isfinite(x)], y[~np.isfinite(x)], equal_nan=True)
        if not same_nan or not infs_equal or diff > ATOL + RTOL * scale:
            raise ConversionError(
                f"signature {c.key!r}: output {i} differs from the original by up to {diff:.3g} "
                f"(allowed {ATOL + RTOL * scale:.3g}; NaN positions "
                f"{'agree' if same_nan else 'differ'})"
            )
    c.max_abs_diff = max(worst, c.max_abs_diff or 0.0)


def _launches(c: ConvertedSignature, kwargs: dict[str, Any]) -> tuple[int, int] | None:
    from tf_stitch.launches.op_launches import count_tf_launches

    names = list(kwargs)
    args = [tf.convert_to_tensor(kwargs[n], dtype=c.specs[n].dtype) for n in names]

    def call(fn: Any) -> Callable[..., Any]:
        return lambda *xs: fn(**dict(zip(names, xs, strict=True)))

    try:
        before = count_tf_launches(call(c.original), args).per_step
        after = count_tf_launches(call(c.function), args).per_step
    except RuntimeError:  # a profiler session is already running
        return None
    return before, after
