"""`tf-stitch convert IN OUT`: the converter from the command line. It checks the converted
signatures against the originals on random inputs (unknown dims set to `--check-dim`) before
saving, unless `--no-check`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow as tf

from tf_stitch.convert.converter import Converter
from tf_stitch.convert.inputs import ConversionError, check_output_dir, parse_shape_flag


def run(args: argparse.Namespace) -> int:
    check_output_dir(args.output, args.overwrite)  # before the (long) conversion
    shapes = dict(parse_shape_flag(s) for s in args.input_shape)
    if args.check_dim < 1:
        raise ConversionError("--check-dim must be >= 1")
    targets = [t for t in args.targets.split(",") if t]
    converter = Converter(args.input, args.signature, shapes, targets=targets)
    converter.convert(progress=sys.stderr)
    if not args.no_check:
        converter.build(lambda: random_batches(converter, args.check_dim))
    out = converter.save(args.output, overwrite=args.overwrite)
    converter.summary()
    print(f"tf-stitch: wrote {out}")
    return 0


def random_batches(converter: Converter, unknown: int) -> Iterator[dict[str, Any]]:
    """One batch of random inputs per converted signature with numeric inputs."""
    rng = np.random.default_rng(0)
    for c in converter.converted.values():
        batch = {}
        for name, spec in c.specs.items():
            dims = (
                [unknown if d is None else d for d in spec.shape.as_list()]
                if spec.shape.rank is not None
                else [unknown]
            )
            batch[name] = _random(rng, dims, spec.dtype)
        if all(v is not None for v in batch.values()):
            yield batch
        else:
            print(
                f"tf-stitch: signature {c.key!r} has non-numeric inputs: not checked",
                file=sys.stderr,
            )


def _random(rng: np.random.Generator, dims: list[int], dtype: tf.DType) -> Any:
    if dtype.is_floating:
        return rng.standard_normal(dims).astype(dtype.as_numpy_dtype)
    if dtype.is_integer:
        return rng.integers(0, 10, dims).astype(dtype.as_numpy_dtype)
    if dtype.is_bool:
        return rng.integers(0, 2, dims).astype(bool)
    return None
