"""Kernels per step and latency: TensorFlow vs XLA:CPU vs tf_stitch, measured interleaved.

    python benchmarks/foundation.py [--rounds 30] [--json results.json]

Workloads: layer norm + exact GELU on [4096, 768], and the demo's BERT-style encoder layer
(batch 4, sequence 128). Kernel counts come from profiler traces (TF, tf_stitch) and XLA's
optimized HLO; latencies are medians (min-max) of wall time per call, the three variants called
in turn in every round. Prints the date, the machine and the targets of the foundation issue.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tensorflow as tf

from benchmarks.compare import compare
from tf_stitch.bench.report import run_header
from tf_stitch.models.encoder import encoder_layer
from tf_stitch.profiler.measure.timing import Latency


def layer_norm_gelu(x: tf.Tensor, g: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.math.squared_difference(x, m), -1, keepdims=True)
    return tf.nn.gelu((x - m) * tf.math.rsqrt(v + 1e-5) * g + b, approximate=False)


def workloads() -> dict[str, tuple[Callable[..., Any], list[tf.Tensor]]]:
    x = tf.random.stateless_normal([4096, 768], seed=[0, 1])
    g = tf.random.stateless_normal([768], seed=[0, 2])
    b = tf.random.stateless_normal([768], seed=[0, 3])
    model = encoder_layer()

    def encoder(t: tf.Tensor) -> tf.Tensor:
        return model(t, training=False)

    tokens = tf.random.stateless_normal([4, 128, 768], seed=[0, 4])
    return {
        "layer norm + GELU [4096,768]": (layer_norm_gelu, [x, g, b]),
        "encoder layer [4,128,768]": (encoder, [tokens]),
    }


def measure(fn: Callable[..., Any], inputs: list[tf.Tensor], rounds: int) -> dict[str, Any]:
    specs = [
        tf.TensorSpec([None, *t.shape[1:]], t.dtype)
        if t.shape.rank > 1
        else tf.TensorSpec(t.shape, t.dtype)
        for t in inputs
    ]
    return compare(fn, specs, inputs, rounds)


def _row(name: str, kernels: int | None, lat: Latency) -> str:
    k = "n/a" if kernels is None else str(kernels)
    return f"  {name:<11} {k:>8}   {lat.median_ms:8.2f} ms  ({lat.min_ms:.2f}-{lat.max_ms:.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    now, header = run_header(f"Python {platform.python_version()}")
    print(header)
    results: dict[str, Any] = {}
    for name, (fn, inputs) in workloads().items():
        r = measure(fn, inputs, args.rounds)
        results[name] = r
        lat, k = r["latency"], r["kernels"]
        print(f"\n{name}  ({args.rounds} interleaved rounds)")
        print(f"  {'':<11} {'kernels':>8}   {'median':>11}  (min-max)")
        for variant in ("TensorFlow", "XLA:CPU", "tf_stitch"):
            print(_row(variant, k[variant], lat[variant]))
        ts = lat["tf_stitch"].median_ms
        print(
            f"  tf_stitch/TF latency: {ts / lat['TensorFlow'].median_ms:.3f} "
            f"({lat['TensorFlow'].median_ms / ts:.2f}x faster); "
            f"tf_stitch/XLA:CPU: {ts / lat['XLA:CPU'].median_ms:.3f}"
        )
        if k["XLA:CPU"]:
            print(
                f"  kernels tf_stitch/XLA:CPU: {k['tf_stitch']}/{k['XLA:CPU']} = "
                f"{k['tf_stitch'] / k['XLA:CPU']:.2f}"
            )
        for note in r["notes"]:
            print(f"  note: {note}")
    print(
        "\ntargets: layer norm + GELU >= 4x faster than TF and faster than XLA:CPU; "
        "encoder kernels <= 1/2 of XLA:CPU's"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "date": now,
                    "machine": platform.processor() or platform.machine(),
                    "results": results,
                },
                f,
                indent=2,
                default=lambda o: o.__dict__,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
