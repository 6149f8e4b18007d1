"""`tf_stitch.stitch(model)`: Keras' `fit`, `evaluate` and `predict` run stitched steps.

XLA has one switch for Keras (`model.compile(jit_compile=True)`); this is tf_stitch's. The
model's step functions (`train_step`, `test_step`, `predict_step`, its own overrides included)
are wrapped in `tf_stitch.function` in place of the `tf.function` Keras makes (the one it
runs them in is `model.train_function.stitched`, and so on): each batch
signature is traced, optimized once and cached (the last, smaller batch of an epoch is a second
signature), variables stay live, so the optimizer's and metrics' updates are TensorFlow's own
writes (see graph/freeze.py). Keras builds the step functions when `fit` & co. first need them
and again after `compile`; the switch stays on until `unstitch(model)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from tf_stitch.optimize import function as stitched_function

_MAKERS = ("make_train_function", "make_test_function", "make_predict_function")
_FUNCTIONS = ("train_function", "test_function", "predict_function")


def stitch(model: Any) -> Any:
    """Makes `model.fit`, `evaluate` and `predict` (and `train_on_batch` & co.) run their
    steps through tf_stitch. Returns the model. Raises TypeError for what is not a compiled-or-
    compilable Keras 3 model, ValueError for a model that runs eagerly or is distributed."""
    try:
        import keras
    except ImportError:  # pragma: no cover - keras ships with TensorFlow 2.21
        raise TypeError("tf_stitch.stitch needs Keras 3") from None
    if not isinstance(model, keras.Model):
        raise TypeError(f"tf_stitch.stitch expects a keras.Model, got {type(model).__name__}")
    if not hasattr(model, "make_train_function") or not hasattr(model, "distribute_strategy"):
        raise TypeError("tf_stitch.stitch needs a Keras 3 model on the TensorFlow backend")
    if model.distribute_strategy is not tf.distribute.get_strategy():
        raise ValueError(
            "tf_stitch.stitch runs steps on the default strategy only; build the model "
            "outside the distribution strategy's scope"
        )
    model.make_train_function = _maker(model, "train_function", lambda: model.train_step)
    model.make_test_function = _maker(model, "test_function", lambda: model.test_step)
    model.make_predict_function = _maker(
        model, "predict_function", lambda: model.predict_step, predict=True
    )
    for name in _FUNCTIONS:
        setattr(model, name, None)  # built again, stitched, when next needed
    return model


def unstitch(model: Any) -> Any:
    """Undoes `stitch(model)`: Keras makes its own step functions again."""
    for name in _MAKERS:
        model.__dict__.pop(name, None)
    for name in _FUNCTIONS:
        setattr(model, name, None)
    return model


def is_stitched(model: Any) -> bool:
    """Whether `stitch(model)` is on."""
    return all(name in vars(model) for name in _MAKERS)


def _maker(
    model: Any, attr: str, step: Callable[[], Callable[..., Any]], predict: bool = False
) -> Callable[..., Any]:
    def make(force: bool = False) -> Any:
        if getattr(model, attr) is not None and not force:
            return getattr(model, attr)
        if model.run_eagerly:
            raise ValueError("tf_stitch.stitch: the model runs eagerly (run_eagerly=True)")
        function = _predict_function if predict else _step_function
        setattr(model, attr, function(model, stitched_function(step())))
        return getattr(model, attr)

    return make


def _without_optionals(data: Any) -> Any:
    """Keras passes missing parts of a batch (no sample weights) as empty Optionals."""
    return tf.nest.map_structure(
        lambda t: None if isinstance(t, tf.experimental.Optional) else t, data
    )


def _step_function(model: Any, stitched: Any) -> Callable[[Any], Any]:
    """What Keras calls with an epoch's iterator: `steps_per_execution` batches, each one
    stitched step; StopIteration when the iterator is empty."""

    def run(iterator: Any) -> Any:
        outputs = None
        for _ in range(model.steps_per_execution):
            if isinstance(iterator, tf.data.Iterator):
                optional = iterator.get_next_as_optional()
                if not optional.has_value():
                    break
                data = optional.get_value()
            else:
                try:
                    data = next(iterator)
                except StopIteration:
                    break
            outputs = stitched(_without_optionals(data))
        if outputs is None:
            raise StopIteration
        return outputs

    run.stitched = stitched  # type: ignore[attr-defined]
    return run


def _predict_function(model: Any, stitched: Any) -> Callable[[Any], Any]:
    """What Keras' `predict` calls with a list of `steps_per_execution` batches."""

    def run(data: Any) -> Any:
        outputs = None
        for batch in data:
            step = stitched(_without_optionals(batch))
            outputs = (
                step
                if outputs is None
                else tf.nest.map_structure(lambda a, b: tf.concat([a, b], 0), outputs, step)
            )
        return outputs

    run.stitched = stitched  # type: ignore[attr-defined]
    return run
