"""Kernels per step and latency on the ten deep-stitching workloads: TF vs XLA:CPU vs tf_stitch.

    python benchmarks/deep_stitching.py [--rounds 15] [--only rnn,bert] [--json out.json]

Each workload (tf_stitch/workloads/, FusionStitching's and AStitch's evaluation sets, random
weights, the batch written in its module) is optimized, checked against the original, counted
(profiler traces for TF and tf_stitch, optimized HLO for XLA:CPU) and timed with the three
variants called in turn in every round. Prints medians (min-max), the ratios, and the issue's
targets: kernels <= 0.4x XLA:CPU's (geometric mean) and never more than XLA:CPU's; latency
below XLA:CPU's on at least 8 of the 10.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from benchmarks.compare import compare
from tf_stitch.bench.report import run_header
from tf_stitch.workloads import WORKLOADS


def measure(name: str, rounds: int) -> dict[str, Any]:
    w = WORKLOADS[name].build()
    return compare(w.fn, w.input_signature, w.inputs, rounds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--only", help="comma-separated workload names")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(WORKLOADS)
    now, header = run_header(f"{args.rounds} interleaved rounds")
    print(header)
    header = (
        f"{'workload':<20}{'kernels TF/XLA/ts':>20}{'ts/XLA':>8}"
        f"{'TF ms':>9}{'XLA ms':>9}{'ts ms':>9}{'ts/TF':>7}{'ts/XLA':>8}{'max err':>10}"
    )
    print(header)
    results: dict[str, Any] = {}
    for name in names:
        r = measure(name, args.rounds)
        results[name] = r
        k, lat = r["kernels"], r["latency"]
        ts, tf_ms, xla_ms = (lat[v].median_ms for v in ("tf_stitch", "TensorFlow", "XLA:CPU"))
        kratio = k["tf_stitch"] / k["XLA:CPU"] if k["XLA:CPU"] else float("nan")
        print(
            f"{name:<20}{k['TensorFlow']:>8}/{k['XLA:CPU']}/{k['tf_stitch']:<6}{kratio:>8.2f}"
            f"{tf_ms:>9.2f}{xla_ms:>9.2f}{ts:>9.2f}{ts / tf_ms:>7.2f}{ts / xla_ms:>8.2f}"
            f"{r['max_abs_error']:>10.1e}",
            flush=True,
        )
    ratios = [
        r["kernels"]["tf_stitch"] / r["kernels"]["XLA:CPU"]
        for r in results.values()
        if r["kernels"]["XLA:CPU"]
    ]
    geomean = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    worse = [n for n, r in results.items() if r["kernels"]["tf_stitch"] > r["kernels"]["XLA:CPU"]]
    faster = [
        n
        for n, r in results.items()
        if r["latency"]["tf_stitch"].median_ms < r["latency"]["XLA:CPU"].median_ms
    ]
    print(
        f"\nkernels tf_stitch/XLA:CPU, geometric mean: {geomean:.2f} (target <= 0.40); "
        f"more kernels than XLA on: {', '.join(worse) or 'none'}"
    )
    print(
        f"latency below XLA:CPU on {len(faster)} of {len(results)} (target >= 8 of 10): "
        f"{', '.join(faster)}"
    )
    for n, r in results.items():
        lat = r["latency"]
        print(
            f"  {n}: " + "; ".join(f"{v} {lat[v]}" for v in ("TensorFlow", "XLA:CPU", "tf_stitch"))
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": now, "results": results}, f, indent=2, default=lambda o: o.__dict__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
