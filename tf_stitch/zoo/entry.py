"""`ZooEntry`: one model of the zoo — how to build it (random weights, nothing downloaded), its
inputs, and its default batch size."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import tensorflow as tf


@dataclass(frozen=True)
class Built:
    """A built model: `model` (a Keras model or a function of tensors) and
    `make_inputs(batch, seed)` giving its seeded random inputs for a batch size."""

    model: Any
    make_inputs: Callable[[int, int], list[tf.Tensor]]


@dataclass(frozen=True)
class ZooEntry:
    """A model of the zoo. `input_shapes` are without the batch dimension; `build(seed)` makes
    the model with seeded random weights."""

    name: str
    family: str
    description: str
    input_shapes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    batch: int
    build: Callable[[int], Built]

    def inputs_text(self) -> str:
        return ", ".join(
            f"{dtype}[{','.join(str(d) for d in shape)}]"
            for shape, dtype in zip(self.input_shapes, self.input_dtypes, strict=True)
        )


def random_inputs(
    shapes: Sequence[Sequence[int]], dtypes: Sequence[str], vocab: int = 1000
) -> Callable[[int, int], list[tf.Tensor]]:
    """`make_inputs(batch, seed)` for inputs of these shapes: normal floats, ids in [0, vocab)."""

    def make(batch: int, seed: int) -> list[tf.Tensor]:
        out = []
        for i, (shape, dtype) in enumerate(zip(shapes, dtypes, strict=True)):
            dims = [batch, *shape]
            if tf.as_dtype(dtype).is_integer:
                out.append(
                    tf.random.stateless_uniform(dims, [seed, i], 0, vocab, dtype=tf.as_dtype(dtype))
                )
            else:
                out.append(tf.random.stateless_normal(dims, [seed, i], dtype=tf.as_dtype(dtype)))
        return out

    return make


def keras_entry(
    name: str,
    family: str,
    description: str,
    shapes: Sequence[Sequence[int]],
    build_model: Callable[[], Any],
    batch: int = 1,
    dtypes: Sequence[str] | None = None,
    vocab: int = 1000,
) -> ZooEntry:
    """A zoo entry for a Keras model made by `build_model()` (weights seeded before it runs)."""
    dtypes = tuple(dtypes or ["float32"] * len(shapes))

    def build(seed: int) -> Built:
        import keras

        keras.utils.set_random_seed(seed)
        return Built(build_model(), random_inputs(shapes, dtypes, vocab))

    return ZooEntry(
        name, family, description, tuple(tuple(s) for s in shapes), dtypes, batch, build
    )
