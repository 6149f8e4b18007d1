"""`tf_stitch.enable()` on Keras models as written: kernels per step, step latency against
TensorFlow (interleaved), the optimizer's time at the first instantiation and a re-instantiation's.

    python benchmarks/enable.py [--rounds 20] [--models mnist_cnn,text_classifier,encoder]

For each model, an inference step (`model(x, training=False)`) and a training step (a
GradientTape step with Adam, as `fit` runs it) are each traced twice as `tf.function`s: one
instantiated with the pass paused (TensorFlow's graph), one with it enabled (stitched). The two
are then called in turn, `--rounds` times after two warm-up rounds; medians with min-max.
Kernels per step are counted from a profiler trace of each (ops that launch no kernel left out).
"First" is the optimizer's time when the stitched step was first instantiated; "again" the wall
time of tracing and instantiating the same step anew (a cache hit) and its first call.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import keras
import numpy as np
import tensorflow as tf

import tf_stitch
from tf_stitch import hook
from tf_stitch.bench.report import run_header
from tf_stitch.launches.op_launches import count_tf_launches
from tf_stitch.profiler.measure.timing import interleaved


def mnist_cnn() -> tuple[keras.Model, np.ndarray, np.ndarray, str]:
    model = keras.Sequential(
        [
            keras.layers.Input((28, 28, 1)),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(64, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dropout(0.5),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    rng = np.random.default_rng(0)
    x = rng.random((64, 28, 28, 1), dtype=np.float32)
    return model, x, rng.integers(0, 10, 64), "sparse_categorical_crossentropy"


def text_classifier() -> tuple[keras.Model, np.ndarray, np.ndarray, str]:
    model = keras.Sequential(
        [
            keras.layers.Input((256,), dtype="int64"),
            keras.layers.Embedding(20000, 64),
            keras.layers.Dropout(0.2),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    rng = np.random.default_rng(1)
    x = rng.integers(0, 20000, (64, 256))
    return model, x, rng.integers(0, 2, (64, 1)).astype("float32"), "binary_crossentropy"


def encoder() -> tuple[keras.Model, np.ndarray, np.ndarray, str]:
    """A BERT-style encoder block (Keras layers), 4 x 128 tokens of width 256."""
    x = keras.Input((128, 256))
    a = keras.layers.MultiHeadAttention(num_heads=4, key_dim=64)(x, x)
    h = keras.layers.LayerNormalization(epsilon=1e-6)(x + a)
    f = keras.layers.Dense(1024, activation="gelu")(h)
    f = keras.layers.Dense(256)(f)
    y = keras.layers.LayerNormalization(epsilon=1e-6)(h + f)
    model = keras.Model(x, y)
    rng = np.random.default_rng(2)
    data = rng.standard_normal((4, 128, 256)).astype(np.float32)
    return model, data, rng.standard_normal((4, 128, 256)).astype(np.float32), "mse"


MODELS: dict[str, Callable[[], tuple[keras.Model, np.ndarray, np.ndarray, str]]] = {
    "mnist_cnn": mnist_cnn,
    "text_classifier": text_classifier,
    "encoder": encoder,
}


def steps(model: keras.Model, loss_name: str) -> dict[str, Callable[[], Any]]:
    """Fresh Python functions for an inference and a training step (each traced anew)."""
    loss_fn = keras.losses.get(loss_name)
    optimizer = keras.optimizers.Adam(1e-3)
    optimizer.build(model.trainable_variables)

    def infer(x: Any) -> Any:
        return model(x, training=False)

    def train(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(loss_fn(y, model(x, training=True)))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    return {"infer": infer, "train": train}


def row(
    name: str,
    kind: str,
    tf_fn: Any,
    on_fn: Any,
    again_fn: Any,
    inputs: tuple[Any, ...],
    rounds: int,
) -> str:
    """One line of the table: `tf_fn` instantiated with the pass paused, `on_fn` (and then
    `again_fn`, the same step traced anew) with it enabled, then both timed interleaved."""
    with hook.paused():
        tf_fn(*inputs)
    tf_stitch.enable()
    before = hook.stats().seconds
    on_fn(*inputs)
    first = hook.stats().seconds - before
    again = "-"
    if again_fn is not None:
        hits, start = hook.stats().cache_hits, time.perf_counter()
        again_fn(*inputs)
        again_ms = (time.perf_counter() - start) * 1e3
        again = f"{again_ms:.0f}{'' if hook.stats().cache_hits > hits else '*'}"
    on_count = count_tf_launches(on_fn, inputs).per_step
    tf_stitch.disable()
    tf_count = count_tf_launches(tf_fn, inputs).per_step
    if kind == "infer":
        diff = float(np.max(np.abs(tf_fn(*inputs).numpy() - on_fn(*inputs).numpy())))
        assert diff < 1e-3, f"{name}: the outputs differ by {diff}"
    latency = interleaved({"tf": lambda: tf_fn(*inputs), "on": lambda: on_fn(*inputs)}, rounds)
    speedup = latency["tf"].median_ms / latency["on"].median_ms
    return (
        f"{name:<16}{kind:<7}{f'{tf_count} -> {on_count}':>15}{latency['tf']!s:>24}"
        f"{latency['on']!s:>24}{speedup:>8.2f}x{first:>9.2f}{again:>10}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    names = [m for m in args.models.split(",") if m]
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        parser.error(f"unknown model(s) {unknown}; known: {', '.join(MODELS)}")
    _, header = run_header(f"{args.rounds} interleaved rounds")
    print(header)
    print(
        f"{'model':<16}{'step':<7}{'kernels TF->on':>15}{'TF ms':>24}{'enabled ms':>24}"
        f"{'speedup':>9}{'first s':>9}{'again ms':>10}"
    )
    for name in names:
        keras.utils.set_random_seed(0)
        model, x, y, loss = MODELS[name]()
        inputs = {"infer": (tf.constant(x),), "train": (tf.constant(x), tf.constant(y))}
        tf_fns = {k: tf.function(f) for k, f in steps(model, loss).items()}
        on_fns = {k: tf.function(f) for k, f in steps(model, loss).items()}
        for kind in ("infer", "train"):
            again = tf.function(steps(model, loss)[kind]) if kind == "infer" else None
            print(row(name, kind, tf_fns[kind], on_fns[kind], again, inputs[kind], args.rounds))
    print("again: * = not a cache hit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
