"""How long optimize() takes on a zoo model, cold and warm, against XLA:CPU's compile of it.

    python benchmarks/optimize_time.py [--model bert_base] [--rounds 3] [--json out.json]
    python benchmarks/optimize_time.py --layers 1,2,4,8,16,24

Each round runs, in this order and each in a fresh process: optimize() with an empty kernel
cache (cold), optimize() again with the cache the cold run left (warm: a new process, the same
cache), and XLA:CPU's first call of the same function (`jit_compile=True`) minus its second
call (its compile). The model is built and traced before the clock starts in every process.
Prints medians (min-max) over the rounds, the optimized function's first-call setup (its first
call minus its second, which TensorFlow spends building it), the time of every pass of the cold
and warm runs (the median round's), the kernels and how many distinct sources they have, and
the issue's targets.
`--layers` instead times encoders of that many layers (warm) and prints each stage's time per
layer, to show how optimize() scales with the model's depth.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _encoder(layers: int) -> tuple[Any, list[Any]]:
    """A stack of `layers` BERT-style encoder layers (hidden 256, 4 heads, FFN 1024, 128
    tokens), random weights, and a batch of 2."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    x = keras.Input((128, 256))
    y = x
    for i in range(layers):
        attn = keras.layers.MultiHeadAttention(4, 64, name=f"attention_{i}")(y, y)
        h = keras.layers.LayerNormalization(epsilon=1e-12)(y + attn)
        f = keras.layers.Dense(1024, activation="gelu")(h)
        y = keras.layers.LayerNormalization(epsilon=1e-12)(h + keras.layers.Dense(256)(f))
    return keras.Model(x, y), [tf.random.stateless_normal([2, 128, 256], [0, 1])]


def _concrete(model: str) -> tuple[Any, list[Any], Any]:
    """The model's traced function (batch unknown), its inputs and its Python function: a zoo
    model by name, or `encoder:N` (N encoder layers, see `_encoder`)."""
    import tensorflow as tf

    from tf_stitch.zoo import zoo

    if model.startswith("encoder:"):
        keras_model, inputs = _encoder(int(model.split(":")[1]))
    else:
        entry = zoo()[model]
        built = entry.build(0)
        inputs = built.make_inputs(entry.batch, 0)
        keras_model = built.model
    specs = [tf.TensorSpec([None, *x.shape[1:]], x.dtype) for x in inputs]

    def call(*xs: Any) -> Any:
        return keras_model(list(xs) if len(xs) > 1 else xs[0], training=False)

    fn = tf.function(call, input_signature=specs)
    return fn.get_concrete_function(), inputs, call


def _measure_optimize(model: str) -> dict[str, Any]:
    """One optimize() of `model` in this process: total seconds, per-pass seconds, kernels."""
    import importlib

    import tf_stitch
    from tf_stitch.graph import frontends
    from tf_stitch.passes.base import Pass

    optimize_module = importlib.import_module("tf_stitch.optimize")  # the module, not the call
    concrete, inputs, _ = _concrete(model)
    stages: dict[str, float] = defaultdict(float)
    original_run = Pass.run

    def timed_run(self: Pass, graph: Any, ctx: Any) -> Any:
        started = time.perf_counter()
        try:
            return original_run(self, graph, ctx)
        finally:
            stages[f"pass {self.name}"] += time.perf_counter() - started

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                stages[name] += time.perf_counter() - started

        return wrapper

    Pass.run = timed_run  # type: ignore[method-assign]
    build_module = importlib.import_module("tf_stitch.codegen.build")
    for name in ("_compile_all", "_build_cuda"):  # the C++ compiler and nvcc
        setattr(build_module, name, timed("compile kernels", getattr(build_module, name)))
    frontends.load = timed("freeze and import", frontends.load)
    optimize_module.validate = timed("validate", optimize_module.validate)
    optimize_module.OptimizedFunction.__init__ = timed(  # type: ignore[method-assign]
        "wrap as a TF function", optimize_module.OptimizedFunction.__init__
    )
    weights = sum(v.numpy().nbytes for v in concrete.graph.variables)
    rss_before = _rss_bytes()
    started = time.perf_counter()
    optimized = tf_stitch.optimize(concrete)
    total = time.perf_counter() - started
    # The process's peak resident memory over what it held before optimize() (the peak of
    # model building and tracing, before, is below it for the models measured).
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss_before
    # Compiling is the compilers' time, not the pass's: shown as its own stage.
    if "pass outline" in stages:
        stages["pass outline"] -= stages.get("compile kernels", 0.0)
    calls = []
    for _ in range(2):
        started = time.perf_counter()
        optimized(*inputs)
        calls.append(time.perf_counter() - started)
    return {
        "seconds": total,
        # What TensorFlow spends on the optimized function's first call beyond a call's run
        # time (instantiating and optimizing it): part of what a user waits for, as the
        # compile is of XLA's first call.
        "first_call": calls[0] - calls[1],
        "peak_bytes": max(peak, 0),
        "weight_bytes": weights,
        "stages": dict(stages),
        "kernels": len(optimized.kernels),
        "distinct_sources": len({k.source for k in optimized.kernels}),
    }


def _rss_bytes() -> int:
    """This process's resident memory now."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _measure_xla(model: str) -> dict[str, Any]:
    import tensorflow as tf

    _, inputs, call = _concrete(model)
    xla = tf.function(call, jit_compile=True)
    started = time.perf_counter()
    xla(*inputs)
    first = time.perf_counter() - started
    started = time.perf_counter()
    xla(*inputs)
    second = time.perf_counter() - started
    return {"seconds": first - second}


def _child(kind: str, model: str, cache: str) -> dict[str, Any]:
    env = {**os.environ, "TF_STITCH_CACHE_DIR": cache, "TF_CPP_MIN_LOG_LEVEL": "3"}
    command = [sys.executable, __file__, "--child", kind, "--model", model]
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{kind} run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def _median_round(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]


def _scaling(layers: list[int]) -> dict[str, Any]:
    """Warm optimize() of encoders of `layers` layers (one cache: the first compiles), each in a
    fresh process; prints every stage's time per layer and its largest over smallest."""
    with tempfile.TemporaryDirectory(prefix="tf_stitch_cache_") as cache:
        _child("optimize", f"encoder:{layers[0]}", cache)  # compiles the (shared) kernels
        runs = {n: _child("optimize", f"encoder:{n}", cache) for n in layers}
    stages = sorted(
        {name for r in runs.values() for name in r["stages"]},
        key=lambda name: -runs[layers[-1]]["stages"].get(name, 0.0),
    )
    print(f"ms per layer, warm, in a fresh process each ({', '.join(map(str, layers))} layers):")
    print(f"  {'stage':<34}" + "".join(f"{n:>8}" for n in layers) + "  max/min  last/first")
    for name in [*stages, "total"]:
        per = [
            1000 * (r["seconds"] if name == "total" else r["stages"].get(name, 0.0)) / n
            for n, r in runs.items()
        ]
        if name != "total" and max(per) * layers[-1] < 50:  # under 50 ms at the largest
            continue
        ratio = max(per) / min(per) if min(per) > 0 else float("inf")
        # Growth with depth: a fixed cost spread over more layers falls, and shows in max/min.
        growth = per[-1] / per[0] if per[0] > 0 else float("inf")
        cells = "".join(f"{v:8.1f}" for v in per)
        print(f"  {name:<34}{cells}  {ratio:7.2f}  {growth:10.2f}")
    return {str(n): r for n, r in runs.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bert_base", help="a zoo model (default bert_base)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument(
        "--layers", help="instead: encoders of these many layers (e.g. 1,2,4,8,16,24), warm"
    )
    parser.add_argument("--child", choices=("optimize", "xla"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        measure = _measure_optimize if args.child == "optimize" else _measure_xla
        print(json.dumps(measure(args.model)))
        return 0
    if args.layers:
        try:
            counts = sorted({int(n) for n in args.layers.split(",")})
        except ValueError:
            parser.error(f"--layers takes comma-separated counts, got {args.layers!r}")
        if not counts or counts[0] < 1:
            parser.error("--layers counts must be at least 1")
        scaling = _scaling(counts)
        if args.json:
            Path(args.json).write_text(json.dumps({"scaling": scaling}, indent=1))
        return 0
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    runs: dict[str, list[dict[str, Any]]] = {"cold": [], "warm": [], "xla": []}
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="tf_stitch_cache_") as cache:
            runs["cold"].append(_child("optimize", args.model, cache))
            runs["warm"].append(_child("optimize", args.model, cache))
        runs["xla"].append(_child("xla", args.model, ""))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M+00:00")
    print(f"# {when} | {platform.node()} | {os.cpu_count()} CPUs | {args.rounds} rounds")
    cold, warm, xla = ([x["seconds"] for x in runs[k]] for k in ("cold", "warm", "xla"))
    print(f"{args.model}: optimize() cold {_spread(cold)}, warm {_spread(warm)}")
    first = [x["first_call"] for x in runs["warm"]]
    ready = [w + f for w, f in zip(warm, first, strict=True)]
    print(f"first call of the optimized function (first call - second call): {_spread(first)}")
    print(f"warm optimize() + its first call's setup: {_spread(ready)}")
    print(f"XLA:CPU compile (first call - second call): {_spread(xla)}")
    median = _median_round(runs["cold"])
    print(f"kernels: {median['kernels']}, distinct sources: {median['distinct_sources']}")
    for kind in ("cold", "warm"):
        peak = max(r["peak_bytes"] for r in runs[kind])
        weights = median["weight_bytes"]
        print(
            f"{kind}: peak memory over the process before optimize(): {peak / 2**20:.0f} MB, "
            f"{peak / max(weights, 1):.2f}x the weights' {weights / 2**20:.0f} MB (target <= 3)"
        )
    for kind in ("cold", "warm"):
        run = _median_round(runs[kind])
        print(f"\n{kind} run ({run['seconds']:.2f} s), stages over 2% of it:")
        for name, s in sorted(run["stages"].items(), key=lambda kv: -kv[1]):
            if s >= 0.02 * run["seconds"]:
                print(f"  {name:<34}{s:7.2f} s  {100 * s / run['seconds']:5.1f}%")
        passes = {n: v for n, v in run["stages"].items() if n.startswith("pass ")}
        if passes:
            top = max(passes, key=lambda n: passes[n])
            share = 100 * passes[top] / run["seconds"]
            print(f"  largest pass: {top[5:]}, {share:.1f}% (target: no pass over 20%)")
    ratio = statistics.median(ready) / statistics.median(xla)
    print(f"\n(warm + first call) / XLA:CPU compile: {ratio:.2f} (target <= 2)")
    if args.json:
        Path(args.json).write_text(json.dumps({"date": when, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
