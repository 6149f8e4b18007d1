"""Column kernels (reductions over outer axes): TF vs XLA:CPU vs tf_stitch.

    python benchmarks/column_kernels.py [--rounds 30]

Batch-norm training statistics and normalization over N,H,W of an NHWC tensor, DIEN-style
attention pooling (a weighted sum over time of [B,T,H]) and max/min/prod over the batch axis.
Prints kernels per step and medians (min-max) of the three variants called in turn.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tensorflow as tf

from benchmarks.compare import compare
from tf_stitch.bench.report import run_header


def batch_norm_training(x: tf.Tensor) -> tf.Tensor:
    mean = tf.reduce_mean(x, [0, 1, 2], keepdims=True)
    var = tf.reduce_mean(tf.square(x - mean), [0, 1, 2], keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + 1e-3) * 1.5 + 0.1


def attention_pooling(scores: tf.Tensor, history: tf.Tensor) -> tf.Tensor:
    return tf.tanh(tf.reduce_sum(tf.sigmoid(scores) * history, 1))


def column_extremes(x: tf.Tensor) -> tf.Tensor:
    return tf.reduce_max(tf.exp(x), 0) - tf.reduce_min(x, 0)


CASES: dict[str, tuple[Callable[..., tf.Tensor], list[list[int]]]] = {
    "batch_norm_training [32,28,28,64]": (batch_norm_training, [[32, 28, 28, 64]]),
    "attention_pooling [256,50,64]": (attention_pooling, [[256, 50, 1], [256, 50, 64]]),
    "column_extremes [4096,256]": (column_extremes, [[4096, 256]]),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    _, header = run_header(f"{args.rounds} interleaved rounds")
    print(header)
    print(f"{'case':<36}{'kernels TF/XLA/ts':>20}  latency (median, min-max)")
    for name, (fn, shapes) in CASES.items():
        inputs = [tf.random.normal(s, seed=i) for i, s in enumerate(shapes)]
        signature = [tf.TensorSpec(s) for s in shapes]
        r = compare(fn, signature, inputs, args.rounds)
        k, lat = r["kernels"], r["latency"]
        counts = f"{k['TensorFlow']}/{k['XLA:CPU']}/{k['tf_stitch']}"
        print(f"{name:<36}{counts:>20}  max err {r['max_abs_error']:.1e}")
        for variant in ("TensorFlow", "XLA:CPU", "tf_stitch"):
            print(f"{'':<38}{variant:<12}{lat[variant]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
