"""Real models, held out: kernels per step and CPU latency of TF vs XLA vs tf_stitch.

    python benchmarks/real_models.py [--only resnet50,t5_small] [--zoo all|NAME,...]
        [--rounds 15] [--confirm-rounds 25] [--keras-init] [--freeze] [--no-xla-gpu]
        [--json out.json]
    python benchmarks/real_models.py --fill-gpu-counts run.json --json filled.json


The models (benchmarks/model_builders.py) are built from configuration with public code
(keras.applications ResNet50, EfficientNet-B0, MobileNetV3-Small, DenseNet121, InceptionV3,
Xception, ConvNeXt-Tiny and EfficientNetV2-B0, keras_hub's T5 in
T5-small's configuration, a DLRM-style recommender and Keras' BiLSTM classifier in Keras layers),
with seeded random weights; `--zoo` adds models of tf_stitch's zoo. Each is optimized (its
variables live, as `optimize()` keeps them by default; `--freeze` freezes them), checked
against TensorFlow (rtol = atol = 1e-4), counted (TF's and tf_stitch's executor traces, XLA:CPU's
optimized HLO, XLA:GPU's for a deviceless H100 with both GEMM backends, and the model of what
tf_stitch's graph launches on a GPU) and timed with TF, XLA:CPU and tf_stitch called in turn in
every round (medians, min-max). tf_stitch's latency against TensorFlow's is the median of their
per-round ratio with a 95% interval; where it is above 1.03x but within that noise, the two are
measured alone for `--confirm-rounds` more rounds (marked *; bench/latency_ratio.py). Prints
the issue's targets and where they are missed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tensorflow as tf

from benchmarks.model_builders import BUILDERS, RealModel, calibrate_batch_norm, trained_like
from tf_stitch.bench.gpu_plan import count_gpu_plan, count_in_child, report
from tf_stitch.bench.latency_ratio import RATIO_TARGET
from tf_stitch.bench.measure import Measurement, measure_function
from tf_stitch.bench.report import run_header
from tf_stitch.fusion.host_cpu import onednn_enabled


def zoo_model(name: str, seed: int, keras_init: bool) -> RealModel:
    """A model of tf_stitch's zoo at its batch size, weights redrawn and batch-norm statistics
    calibrated as in model_builders."""
    from tf_stitch.graph.frontends import is_keras_model
    from tf_stitch.zoo import zoo

    entry = zoo()[name]
    built = entry.build(seed)
    model = built.model
    if is_keras_model(model) and not keras_init:
        trained_like(model, seed)
        calibrate_batch_norm(model, built.make_inputs(4, seed + 1))
    inputs = built.make_inputs(entry.batch, seed)
    many = len(inputs) > 1
    fn = (
        (lambda *xs: model(list(xs), training=False))
        if many
        else (lambda x: model(x, training=False))
    )
    if not is_keras_model(model):
        fn = model
    signature = [tf.TensorSpec([None, *x.shape[1:]], x.dtype) for x in inputs]
    return RealModel(name, entry.description, fn, signature, inputs, model)


def row(name: str, m: Measurement) -> str:
    k, lat = m.kernels, m.latency
    tf_ms, xla_ms, ts_ms = (lat[v].median_ms for v in ("TensorFlow", "XLA:CPU", "tf_stitch"))
    gpu = m.xla_gpu_best()
    return (
        f"{name:<20}{_n(k['tf']):>6}{_n(k['tf_gpu']):>6}{_n(k['xla_cpu']):>6}{_n(gpu):>6}"
        f"{_n(k['tf_stitch_gpu']):>6}{_n(k['tf_stitch_cpu']):>6}"
        f"{tf_ms:>9.2f}{xla_ms:>9.2f}{ts_ms:>9.2f}{_ratio(m):>19}"
        f"{m.max_abs_error:>10.1e}{_match(m)}{m.optimize_s:>8.1f}"
    )


def _ratio(m: Measurement) -> str:
    """tf_stitch/TensorFlow per round, median [95% interval], * where confirmed alone."""
    r = m.ratio
    if r is None:
        return "-"
    return f"{r.value:.2f} [{r.low:.2f}-{r.high:.2f}]{'*' if m.confirm_rounds else ' '}"


def _match(m: Measurement) -> str:
    if m.outputs_match:
        return ""
    if m.tf_self_error is not None:
        return f" MISMATCH (TF's own frozen graph: {m.tf_self_error:.1e})"
    return " MISMATCH"


def _n(v: int | None) -> str:
    return "-" if v is None else str(v)


def targets(results: dict[str, Measurement]) -> list[str]:
    """The issue's targets, each with the models that miss it."""

    def missing(pred: Any) -> str:
        names = [n for n, m in results.items() if pred(m)]
        return ", ".join(names) if names else "none"

    def ratio(m: Measurement) -> float:
        if m.ratio is not None:
            return m.ratio.value
        return m.latency["tf_stitch"].median_ms / m.latency["TensorFlow"].median_ms

    def geomean(xs: list[float]) -> float:
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")

    gpu_ratios = [
        m.kernels["tf_stitch_gpu"] / best
        for m in results.values()
        if (best := m.xla_gpu_best()) and m.kernels["tf_stitch_gpu"] is not None
    ]
    return [
        "outputs match TensorFlow (rtol=atol=1e-4): misses "
        + missing(lambda m: not m.outputs_match)
        + "".join(
            f"\n  {n}: TensorFlow's own frozen graph of it differs from it by "
            f"{m.tf_self_error:.1e} (the model's outputs at these weights depend on the order of "
            "float operations)"
            for n, m in results.items()
            if not m.outputs_match and m.tf_self_error is not None and m.tf_self_error > 1e-4
        ),
        "kernels per step (CPU) <= TensorFlow's: misses "
        + missing(lambda m: (m.kernels["tf_stitch_cpu"] or 0) > (m.kernels["tf"] or 0)),
        "GPU model <= TensorFlow's GPU model: misses "
        + missing(lambda m: (m.kernels["tf_stitch_gpu"] or 0) > (m.kernels["tf_gpu"] or 0)),
        "GPU model <= XLA:GPU's (better backend): misses "
        + missing(
            lambda m: (b := m.xla_gpu_best()) is not None and (m.kernels["tf_stitch_gpu"] or 0) > b
        ),
        f"GPU model / XLA:GPU, geometric mean: {geomean(gpu_ratios):.2f} (target <= 0.70)",
        f"latency <= {RATIO_TARGET:.2f}x TensorFlow (per-round ratio, median; confirmed alone "
        f"where unsure): misses {missing(lambda m: ratio(m) > RATIO_TARGET)}",
        f"latency / TensorFlow, geometric mean: {geomean([ratio(m) for m in results.values()]):.2f}"
        " (target <= 0.90)",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help=f"comma-separated, of: {', '.join(BUILDERS)}")
    parser.add_argument("--zoo", help="also these zoo models (comma-separated, or 'all')")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--confirm-rounds",
        type=int,
        default=25,
        help="rounds of TensorFlow and tf_stitch alone where their ratio is above 1.03x but "
        "within the noise (0: never)",
    )
    parser.add_argument("--keras-init", action="store_true", help="keep Keras' initial values")
    parser.add_argument("--no-xla-gpu", action="store_true", help="skip the XLA:GPU counts")
    parser.add_argument(
        "--freeze", action="store_true", help="freeze the variables (serving), not live"
    )
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument(
        "--fill-gpu-counts",
        metavar="RUN_JSON",
        help="count the GPU plans a --json file's rows lack (their child failed or timed out) "
        "and write the file with them to --json; the other columns stay as measured",
    )
    parser.add_argument("--gpu-plan-of", help=argparse.SUPPRESS)  # a child: see gpu_plan_child
    args = parser.parse_args()
    if args.fill_gpu_counts:
        if not args.json:
            parser.error("--fill-gpu-counts needs --json (where to write the filled file)")
        fill_gpu_counts(args.fill_gpu_counts, args.json, args)
        return 0
    if args.gpu_plan_of:
        model = _build(args.gpu_plan_of, args)
        report(count_gpu_plan(model.fn, model.signature, model.inputs, args.freeze))
        return 0
    names = args.only.split(",") if args.only else ([] if args.zoo else list(BUILDERS))
    unknown = [n for n in names if n not in BUILDERS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(BUILDERS)}")
    zoo_names: list[str] = []
    if args.zoo:
        from tf_stitch.zoo import zoo

        known = list(zoo())
        zoo_names = known if args.zoo == "all" else args.zoo.split(",")
        if bad := [n for n in zoo_names if n not in known]:
            parser.error(f"not in the zoo: {', '.join(bad)}")
    now, header = run_header(
        f"{args.rounds} interleaved rounds",
        f"weights {'Keras initial' if args.keras_init else 'trained-like'}",
        f"variables {'frozen' if args.freeze else 'live'}",
    )
    print(header)
    print(
        f"{'model':<20}{'TF':>6}{'TFGPU':>6}{'XLA':>6}{'XGPU':>6}{'tsGPU':>6}{'tsCPU':>6}"
        f"{'TF ms':>9}{'XLA ms':>9}{'ts ms':>9}{'ts/TF [95%]':>19}{'max err':>10}{'opt s':>8}"
    )
    results: dict[str, Measurement] = {}
    # Zoo models are named zoo:NAME (the zoo has a bilstm of its own, a smaller one).
    for name in [*names, *(f"zoo:{n}" for n in zoo_names)]:
        model = _build(name, args)
        m = measure_function(
            model.fn,
            model.signature,
            model.inputs,
            args.rounds,
            gpu_target=None if args.no_xla_gpu else "h100",
            freeze=args.freeze,
            confirm_rounds=args.confirm_rounds,
        )
        if m.kernels["tf_stitch_gpu"] is None and not onednn_enabled():
            gpu_plan_child(name, m, args)
        results[name] = m
        print(row(name, m), flush=True)
        if args.json:  # after every model: a run that dies later keeps what it measured
            _write_json(args.json, now, results)
        del model
        _release()
    print()
    for line in targets(results):
        print(line)
    for name, m in results.items():
        for note in m.notes:
            print(f"  {name}: {note}")
    return 0


def _build(name: str, args: argparse.Namespace) -> RealModel:
    if name.startswith("zoo:"):
        return zoo_model(name.removeprefix("zoo:"), args.seed, args.keras_init)
    return BUILDERS[name](args.seed, args.keras_init)


def gpu_plan_child(name: str, m: Measurement, args: argparse.Namespace) -> None:
    """Where this process's TensorFlow cannot run the graph planned for a GPU (oneDNN off: its
    default on some CPUs), a child process with oneDNN on rebuilds the same seeded model and
    counts that graph (bench/gpu_plan.py); its count and its outputs' error join `m`."""
    argv = [__file__, "--gpu-plan-of", name, "--seed", str(args.seed)]
    argv += ["--keras-init"] * args.keras_init + ["--freeze"] * args.freeze
    try:
        child = count_in_child(argv)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        m.notes.append(f"GPU count: {e}")
        return
    m.kernels["tf_stitch_gpu"] = child.kernels
    m.gpu_by_type = child.by_type
    m.max_abs_error = max(m.max_abs_error, child.max_abs_error)
    m.outputs_match = m.outputs_match and child.outputs_match
    m.notes = [n for n in m.notes if "oneDNN is off" not in n]
    m.notes.append(
        "GPU count: of the graph optimized for a GPU (NCHW convolutions), traced in a child "
        "process with oneDNN on (this one runs TensorFlow's default, oneDNN off)"
    )
    m.notes.extend(f"GPU count: {n}" for n in child.notes)


def fill_gpu_counts(source: str, out: str, args: argparse.Namespace) -> int:
    """Counts in a child (gpu_plan_child's) the GPU plan of each row of `source` that has no
    GPU count, and writes `source` with them to `out` after each; how many were filled. Pass
    the run's own --seed, --keras-init and --freeze."""
    try:
        payload = json.loads(Path(source).read_text())
        results = payload["results"]
        rows = [(name, row, row["kernels"]) for name, row in results.items()]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise SystemExit(f"{source}: not a real_models.py --json file ({e})") from None
    filled = 0
    when = run_header()[0]
    for name, row, kernels in rows:
        if kernels.get("tf_stitch_gpu") is not None:
            continue
        argv = [__file__, "--gpu-plan-of", name, "--seed", str(args.seed)]
        argv += ["--keras-init"] * args.keras_init + ["--freeze"] * args.freeze
        try:
            child = count_in_child(argv)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"{name}: {e}", flush=True)
            continue
        kernels["tf_stitch_gpu"] = child.kernels
        row["gpu_by_type"] = child.by_type
        row["max_abs_error"] = max(row.get("max_abs_error", 0.0), child.max_abs_error)
        row["outputs_match"] = row.get("outputs_match", True) and child.outputs_match
        notes = [n for n in row.get("notes", []) if not n.startswith("GPU count")]
        notes.append(f"GPU count: counted later ({when}, --fill-gpu-counts), with oneDNN on")
        row["notes"] = notes + [f"GPU count: {n}" for n in child.notes]
        filled += 1
        print(
            f"{name}: {child.kernels} kernels (GPU model), outputs match: {child.outputs_match}",
            flush=True,
        )
        _write_payload(out, payload)
    if not filled:
        _write_payload(out, payload)
    return filled


def _write_payload(path: str, payload: dict[str, Any]) -> None:
    tmp = Path(path).with_suffix(".partial")
    tmp.write_text(json.dumps(payload, indent=2))
    tmp.replace(path)


def _write_json(path: str, now: str, results: dict[str, Measurement]) -> None:
    payload = {"date": now, "machine": platform.node(), "results": results}
    text = json.dumps(payload, indent=2, default=lambda o: o.__dict__)
    tmp = Path(path).with_suffix(".partial")
    tmp.write_text(text)
    tmp.replace(path)


def _release() -> None:
    """Frees what one model's measurement left cached: Keras' graph state, and TensorFlow's
    function instantiations (counting makes fresh ones, see profiler/measure/fresh_executor.py),
    which over the zoo's largest models filled 24 GB and the kernel killed the run."""
    import gc

    import keras
    from tensorflow.python.eager import context

    keras.backend.clear_session()
    context.context().clear_kernel_cache()
    gc.collect()


if __name__ == "__main__":
    sys.exit(main())
