"""Latency of a SavedModel and its `tf-stitch convert` output, interleaved in one process.

    python benchmarks/converted_saved_model.py ORIGINAL CONVERTED [--signature serving_default]
        [--batch 4] [--rounds 20]

Loads both with `tf.saved_model.load` (after `import tf_stitch`), feeds the signature random
inputs (unknown dims set to `--batch`), checks that the outputs agree, then calls the two in
turn `--rounds` times after two warm-up rounds and prints medians with min-max, the date and
the machine.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import tensorflow as tf

import tf_stitch  # noqa: F401 - registers the StitchedKernel op
from tf_stitch.bench.report import run_header
from tf_stitch.profiler.measure.timing import interleaved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("original")
    parser.add_argument("converted")
    parser.add_argument("--signature", default="serving_default")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    original = tf.saved_model.load(args.original).signatures[args.signature]
    converted = tf.saved_model.load(args.converted).signatures[args.signature]
    rng = np.random.default_rng(0)
    _, specs = original.structured_input_signature
    feed = {
        name: tf.constant(
            rng.standard_normal([args.batch if d is None else d for d in spec.shape.as_list()]),
            spec.dtype,
        )
        for name, spec in specs.items()
    }
    want, got = original(**feed), converted(**feed)
    diff = max(float(np.max(np.abs(want[k].numpy() - got[k].numpy()))) for k in want)
    _, header = run_header(f"{args.rounds} interleaved rounds")
    print(header)
    print(
        f"# inputs {', '.join(f'{n} {list(t.shape)}' for n, t in feed.items())}; "
        f"max abs diff {diff:.3g}"
    )
    latency = interleaved(
        {"original": lambda: original(**feed), "converted": lambda: converted(**feed)},
        rounds=args.rounds,
    )
    for name, value in latency.items():
        print(f"{name:<10} {value}")
    print(f"speedup {latency['original'].median_ms / latency['converted'].median_ms:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
