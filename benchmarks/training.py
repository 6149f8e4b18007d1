"""Training steps, stitched: losses and weights against TensorFlow, kernels per step, step time.

    python benchmarks/training.py [--only mlp,encoder,...] [--steps 100] [--rounds 10]
        [--no-xla-gpu] [--json out.json]

Each model (Keras layers, built from configuration with seeded weights) is trained with Adam on
seeded batches by one training step (`GradientTape`, `apply_gradients`), three times from the
same seeds: as a `tf.function` (TensorFlow), as a `tf_stitch.function` (its variables live:
the optimizer's writes are TensorFlow's own ops), and for the counts and timings as a third
copy. It prints, per model: the largest relative difference of the loss over `--steps` steps
and of the weights after them (targets: 1e-4), kernels per step (TensorFlow's and tf_stitch's
executor traces, XLA:CPU's and a deviceless H100's optimized HLO, the GPU model of
`launches/gpu_launches.py`), and the step time of TensorFlow, XLA:CPU (`jit_compile=True`)
and tf_stitch called in turn in every round (medians, min-max).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import tensorflow as tf

from tf_stitch.bench.report import run_header


@dataclass
class Trainee:
    model: Any
    optimizer: Any
    inputs: list[tf.Tensor]
    labels: tf.Tensor
    loss: Callable[[tf.Tensor, tf.Tensor], tf.Tensor]


def _seeded(seed: int) -> None:
    import keras

    keras.utils.set_random_seed(seed)


def mlp(seed: int) -> Trainee:
    import keras

    _seeded(seed)
    layers = [keras.Input((64,))]
    layers += [keras.layers.Dense(256, activation="relu") for _ in range(3)]
    model = keras.Sequential([*layers, keras.layers.Dense(10)])
    x = tf.random.stateless_normal([128, 64], [seed, 1])
    y = tf.random.stateless_uniform([128], [seed, 2], 0, 10, tf.int32)
    return _trainee(model, [x], y, "sparse")


def encoder(seed: int) -> Trainee:
    """A BERT-style encoder layer: self-attention, residual and layer norm, GELU FFN."""
    import keras
    from keras import layers

    _seeded(seed)
    inp = keras.Input((32, 128))
    h = layers.MultiHeadAttention(4, 32)(inp, inp)
    h = layers.LayerNormalization(epsilon=1e-12)(inp + h)
    f = layers.Dense(128)(layers.Dense(512, activation="gelu")(h))
    h = layers.LayerNormalization(epsilon=1e-12)(h + f)
    model = keras.Model(inp, layers.Dense(2)(layers.GlobalAveragePooling1D()(h)))
    x = tf.random.stateless_normal([16, 32, 128], [seed, 1])
    y = tf.random.stateless_uniform([16], [seed, 2], 0, 2, tf.int32)
    return _trainee(model, [x], y, "sparse")


def lstm(seed: int, unroll: bool = False) -> Trainee:
    import keras

    _seeded(seed)
    inp = keras.Input((20, 32))
    h = keras.layers.LSTM(64, unroll=unroll)(inp)
    model = keras.Model(inp, keras.layers.Dense(1)(h))
    x = tf.random.stateless_normal([32, 20, 32], [seed, 1])
    y = tf.reduce_mean(x, axis=(1, 2))[:, None]
    return _trainee(model, [x], y, "mse")


def dien(seed: int) -> Trainee:
    from tf_stitch.workloads import dien as workload

    built = workload.build(batch=64, seed=seed)
    y = tf.random.stateless_uniform([64], [seed, 2], 0, 2, tf.int32)
    return _trainee(built.model, list(built.inputs), y, "sparse_probabilities")


def _trainee(model: Any, inputs: list[tf.Tensor], labels: tf.Tensor, kind: str) -> Trainee:
    import keras

    if kind == "mse":
        loss = keras.losses.MeanSquaredError()
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=kind == "sparse")
    optimizer = keras.optimizers.Adam(1e-3)
    optimizer.build(model.trainable_variables)
    return Trainee(model, optimizer, inputs, labels, loss)


MODELS: dict[str, Callable[[int], Trainee]] = {
    "mlp": mlp,
    "encoder": encoder,
    "lstm": lstm,
    "lstm_unrolled": lambda seed: lstm(seed, unroll=True),
    "dien": dien,
}


def step_function(t: Trainee) -> Callable[..., tf.Tensor]:
    """One training step of `t` on (*inputs, labels): the loss before the update."""

    def step(*args: tf.Tensor) -> tf.Tensor:
        *xs, y = args
        with tf.GradientTape() as tape:
            pred = t.model(xs if len(xs) > 1 else xs[0], training=True)
            loss = t.loss(y, pred)
        variables = t.model.trainable_variables
        grads = tape.gradient(loss, variables)
        t.optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    return step


def _signature(t: Trainee) -> list[tf.TensorSpec]:
    return [tf.TensorSpec([None, *x.shape[1:]], x.dtype) for x in [*t.inputs, t.labels]]


@dataclass
class Result:
    loss_rel: float  # largest relative loss difference over the steps
    weight_err: float  # largest |w_ts - w_tf| / (1 + |w_tf|) after the steps
    first_loss: float
    last_loss: float
    kernels: dict[str, int | None]
    ms: dict[str, tuple[float, float, float]]  # median, min, max
    stitched_kernels: int
    notes: list[str]


def measure(name: str, steps: int, rounds: int, seed: int, xla_gpu: bool) -> Result:
    import tf_stitch
    from tf_stitch.bench.measure import _xla_gpu_counts
    from tf_stitch.profiler.measure.timing import interleaved

    build = MODELS[name]
    plain_t, stitched_t = build(seed), build(seed)
    plain = tf.function(step_function(plain_t), input_signature=_signature(plain_t))
    stitched = tf_stitch.function(step_function(stitched_t), input_signature=_signature(plain_t))
    args = [*plain_t.inputs, plain_t.labels]
    expected = [float(plain(*args)) for _ in range(steps)]
    got = [float(stitched(*args)) for _ in range(steps)]
    loss_rel = max(abs(a - b) / max(abs(a), 1e-12) for a, b in zip(expected, got, strict=True))
    weight_err = max(
        float(np.max(np.abs(b.numpy() - a.numpy()) / (1.0 + np.abs(a.numpy()))))
        for a, b in zip(plain_t.model.weights, stitched_t.model.weights, strict=True)
    )
    counted_t = build(seed)
    counted = tf.function(step_function(counted_t), input_signature=_signature(counted_t))
    report = tf_stitch.count_launches(counted, *args)
    kernels: dict[str, int | None] = {
        "tf": report.tf,
        "tf_gpu": report.tf_gpu,
        "xla_cpu": report.xla_cpu,
        "tf_stitch_cpu": report.tf_stitch,
        "tf_stitch_gpu": report.tf_stitch_gpu,
    }
    notes = list(report.notes)
    if xla_gpu:
        gpu_t = build(seed)
        gpu_counts, gpu_notes = _xla_gpu_counts(step_function(gpu_t), args, "h100", lambda _: None)
        best = [v for v in gpu_counts.values() if v is not None]
        kernels["xla_gpu"] = min(best) if best else None
        notes += gpu_notes
    xla_t = build(seed)
    xla = tf.function(step_function(xla_t), input_signature=_signature(xla_t), jit_compile=True)
    latency = interleaved(
        {
            "TensorFlow": lambda: plain(*args),
            "XLA:CPU": lambda: xla(*args),
            "tf_stitch": lambda: stitched(*args),
        },
        rounds=rounds,
        warmup=3,
    )
    ms = {k: (v.median_ms, v.min_ms, v.max_ms) for k, v in latency.items()}
    optimized = stitched.get_optimized(*args)
    return Result(
        loss_rel, weight_err, expected[0], expected[-1], kernels, ms, len(optimized.kernels), notes
    )


def _n(v: int | None) -> str:
    return "-" if v is None else str(v)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help=f"comma-separated, of: {', '.join(MODELS)}")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-xla-gpu", action="store_true", help="skip the XLA:GPU counts")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(MODELS)
    if bad := [n for n in names if n not in MODELS]:
        parser.error(f"unknown model(s) {', '.join(bad)}; known: {', '.join(MODELS)}")
    now, header = run_header(f"{args.steps} steps, Adam", f"{args.rounds} interleaved rounds")
    print(header)
    print(
        f"{'model':<15}{'loss rel':>10}{'w err':>10}{'TF':>6}{'TFGPU':>6}{'XLA':>6}{'XGPU':>6}"
        f"{'tsGPU':>6}{'tsCPU':>6}{'TF ms':>9}{'XLA ms':>9}{'ts ms':>9}{'ts/TF':>7}"
    )
    results: dict[str, Result] = {}
    for name in names:
        r = measure(name, args.steps, args.rounds, args.seed, not args.no_xla_gpu)
        results[name] = r
        k = r.kernels
        tf_ms, xla_ms, ts_ms = (r.ms[v][0] for v in ("TensorFlow", "XLA:CPU", "tf_stitch"))
        print(
            f"{name:<15}{r.loss_rel:>10.1e}{r.weight_err:>10.1e}{_n(k['tf']):>6}"
            f"{_n(k['tf_gpu']):>6}{_n(k['xla_cpu']):>6}{_n(k.get('xla_gpu')):>6}"
            f"{_n(k['tf_stitch_gpu']):>6}{_n(k['tf_stitch_cpu']):>6}"
            f"{tf_ms:>9.2f}{xla_ms:>9.2f}{ts_ms:>9.2f}{ts_ms / tf_ms:>7.2f}",
            flush=True,
        )
    print()
    ok = [n for n, r in results.items() if r.loss_rel <= 1e-4 and r.weight_err <= 1e-4]
    print(f"losses and weights within 1e-4 of TensorFlow's: {len(ok)} of {len(results)}")
    ratios = [
        r.kernels["tf_stitch_gpu"] / r.kernels["xla_gpu"]  # type: ignore[operator]
        for r in results.values()
        if r.kernels.get("xla_gpu") and r.kernels["tf_stitch_gpu"]
    ]
    if ratios:
        gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"GPU model / XLA:GPU, geometric mean: {gm:.2f} (target <= 0.70)")
    for name, r in results.items():
        for note in r.notes:
            print(f"  {name}: {note}")
    if args.json:
        payload = {"date": now, "machine": platform.node(), "results": {}}
        payload["results"] = {n: asdict(r) for n, r in results.items()}
        Path(args.json).write_text(json.dumps(payload, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
