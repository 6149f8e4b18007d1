"""How the fusion planner's time grows with a model's depth: `plan_groups` on encoders of N
layers (the graph as the `stitch` pass gets it), and the share its cycle check takes.

    python benchmarks/plan_time.py [--layers 1,8,24] [--rounds 3]

Per depth: the nodes the planner sees, `plan_groups`' time (median, min-max over the rounds,
all in this process), the same per layer, and the calls to and time in `merge.creates_cycle`
(the median round's). Linear planning keeps the time per layer flat.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from optimize_time import _concrete

from tf_stitch.bench.report import run_header
from tf_stitch.fusion import merge, planner, siblings
from tf_stitch.graph.frontends import load
from tf_stitch.graph.ir import Graph
from tf_stitch.passes.base import PassContext
from tf_stitch.passes.pipeline import PIPELINE


def _before_stitch(layers: int) -> Graph:
    graph = load(_concrete(f"encoder:{layers}")[0]).graph
    ctx = PassContext()
    for p in PIPELINE[: [p.name for p in PIPELINE].index("stitch")]:
        graph = p.run(graph, ctx)
    return graph


def _counting(calls: list[float]) -> Callable[..., bool]:
    original = merge.creates_cycle

    def timed(*args: Any) -> bool:
        start = time.perf_counter()
        try:
            return original(*args)
        finally:
            calls.append(time.perf_counter() - start)

    return timed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="1,8,24")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    depths = [int(n) for n in args.layers.split(",")]
    print(run_header(f"{args.rounds} rounds")[1])
    print(f"{'layers':>6} {'nodes':>6} {'plan_groups s':>24} {'ms/layer':>9} {'cycle checks':>13}")
    for layers in depths:
        graph = _before_stitch(layers)
        rounds: list[tuple[float, list[float]]] = []
        for _ in range(args.rounds):
            calls: list[float] = []
            timed = _counting(calls)
            saved = [
                (m, m.creates_cycle)
                for m in (merge, planner, siblings)
                if hasattr(m, "creates_cycle")
            ]
            for module, _ in saved:
                module.creates_cycle = timed  # type: ignore[attr-defined]
            try:
                start = time.perf_counter()
                planner.plan_groups(graph)
                rounds.append((time.perf_counter() - start, calls))
            finally:
                for module, fn in saved:
                    module.creates_cycle = fn  # type: ignore[attr-defined]
        times = sorted(t for t, _ in rounds)
        median = statistics.median(times)
        checks = sorted(rounds)[len(rounds) // 2][1]
        print(
            f"{layers:>6} {len(graph.nodes):>6} {median:>8.2f} ({times[0]:.2f}-{times[-1]:.2f})"
            f"{'':>6} {median / layers * 1e3:>9.1f} {len(checks):>6} {sum(checks):>5.2f} s",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
