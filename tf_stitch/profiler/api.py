"""`tf_stitch.profile`: leveled, iterative measurement of a model into one correlated profile.

Run A times the model untraced (model level); run B traces it with the host tracer (layer, op
and library levels on CPU). Spans of run B are corrected for the measured cost of the trace
events recorded inside them (`leveled.calibrate_event_cost`), and both raw and corrected times
are kept. Per level, the overhead is run B's step latency against run A's.
"""

from __future__ import annotations

import datetime
import io
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pandas as pd
import tensorflow as tf
from tensorflow.tsl.profiler.protobuf import xplane_pb2

from tb_plugin.metadata import ProfileMeta
from tf_stitch.graph.frontends import is_keras_model
from tf_stitch.profiler.export.otlp import export_otlp
from tf_stitch.profiler.export.xplane_levels import add_levels
from tf_stitch.profiler.measure import leveled, stability
from tf_stitch.profiler.measure.runs import Measured, ProfileError, measure
from tf_stitch.profiler.store.profile import COLUMNS, Profile, check_run_name
from tf_stitch.profiler.trace.intervals import union_ns
from tf_stitch.profiler.trace.layers import keras_layer_names
from tf_stitch.profiler.trace.op_table import op_table
from tf_stitch.profiler.trace.spans import LEVELS, Span
from tf_stitch.progress import Progress
from tf_stitch.runtime.cache import replace_dir
from tf_stitch.version import __version__

__all__ = ["TRACED_LEVELS", "ProfileError", "profile"]

TRACED_LEVELS = ("layer", "op", "library", "kernel")  # what run B measures on this platform
BLOCKS = 8  # runs A and B alternate in blocks of steps // BLOCKS steps (at least 2)
_MISSING = {
    "library": "no op handed work to the intra-op thread pool in the traced steps",
    "kernel": "no StitchedKernel ran and no GPU kernel was traced (a tf_stitch-optimized "
    "graph's kernels are traced on a CPU; GPU kernels come from the device tracer)",
}


def _as_inputs(inputs: Any) -> list[Any]:
    """The model's inputs as a list: one tensor or array, or a sequence of them (a string is
    neither: it is refused, not split into characters)."""
    if isinstance(inputs, str | bytes):
        raise TypeError(f"inputs must be tensors or arrays (or a list of them), not {inputs!r}")
    if isinstance(inputs, tf.Tensor | np.ndarray) or not isinstance(inputs, Sequence):
        inputs = [inputs]
    for x in inputs:
        if isinstance(x, str | bytes) or x is None:
            raise TypeError(f"an input must be a tensor or an array, not {x!r}")
    return [tf.convert_to_tensor(x) if isinstance(x, np.ndarray) else x for x in inputs]


def _callable(model_or_fn: Any, inputs: list[Any]) -> tuple[Callable[[], Any], Any]:
    """One step: the model's graph function for `inputs`, called as a ConcreteFunction (no
    per-call Python dispatch of a polymorphic `tf.function`); and that function's `tf.Graph`
    (None if it has none)."""
    flat = getattr(model_or_fn, "flat_fn", None)
    if flat is not None and isinstance(getattr(flat, "graph", None), tf.Graph):
        # A tf_stitch OptimizedFunction: its graph's function, called directly (wrapping it in
        # a tf.function would add a function call op to every step).
        flat_inputs = model_or_fn.flatten_inputs(tuple(inputs), {})
        return (lambda: flat(*flat_inputs)), flat.graph
    if is_keras_model(model_or_fn):
        model = model_or_fn

        def call_model(*xs: Any) -> Any:
            return model(xs[0] if len(xs) == 1 else list(xs), training=False)

        fn: Any = tf.function(call_model)
    elif hasattr(model_or_fn, "get_concrete_function"):
        fn = model_or_fn
    elif callable(model_or_fn):
        fn = tf.function(model_or_fn)
    else:
        raise TypeError(
            f"cannot profile a {type(model_or_fn).__name__}: pass a Keras model or a "
            "function of tensors"
        )
    try:
        concrete = fn.get_concrete_function(*inputs)
    except AttributeError:  # already a ConcreteFunction
        concrete = fn
    return (lambda: concrete(*inputs)), getattr(concrete, "graph", None)


def _layer_types(model: Any) -> dict[str, str]:
    """Keras layer name -> class name, nested models' layers included."""
    types: dict[str, str] = {}
    for layer in getattr(model, "layers", []):
        types[layer.name] = type(layer).__name__
        types.update(_layer_types(layer) if hasattr(layer, "layers") else {})
    return types


def _decisions(model_or_fn: Any) -> list[dict[str, str]]:
    """The decisions of a tf_stitch-optimized function (explain()'s table), for the tab."""
    from tf_stitch.optimize import OptimizedFunction

    if not isinstance(model_or_fn, OptimizedFunction):
        return []
    return [
        {
            "kind": str(r.kind),
            "subject": r.subject,
            "verdict": "allow" if r.decision else "forbid",
            "reason": r.decision.reason,
        }
        for r in model_or_fn.context.records
    ]


def _fusion_groups(model_or_fn: Any) -> list[dict[str, Any]]:
    """The kernels of a tf_stitch-optimized function (what `explain` shows), for the tab."""
    fields = (
        "node",
        "name",
        "members",
        "schedule",
        "memory",
        "inputs",
        "outputs",
        "source",
        "cuda_source",
        "cuda_unsupported",
    )
    from tf_stitch.optimize import OptimizedFunction

    if not isinstance(model_or_fn, OptimizedFunction):
        return []
    return [{f: getattr(k, f, None) for f in fields} for k in model_or_fn.kernels]


def _pin_autotuning() -> str:
    """Autotuning off for the measurement, so every run picks the same kernels: cuDNN's and
    XLA's autotuners (read when the GPU is first used; set unless the user set them)."""
    if not tf.config.list_physical_devices("GPU"):
        return "not applicable (no autotuning on CPU)"
    os.environ.setdefault("TF_CUDNN_USE_AUTOTUNE", "0")
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_gpu_autotune_level" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_gpu_autotune_level=0".strip()
    cudnn, xla = os.environ["TF_CUDNN_USE_AUTOTUNE"], os.environ["XLA_FLAGS"]
    return f"TF_CUDNN_USE_AUTOTUNE={cudnn}, XLA_FLAGS={xla}"


def _writable(logdir: Path) -> None:
    try:
        logdir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=logdir, prefix=".tf_stitch_write_test"):
            pass
    except OSError as e:
        raise ValueError(f"the logdir {logdir} is not writable: {e.strerror or e}") from None


def _rows(steps: list[list[Span]], model_ns: list[float], cost: float) -> pd.DataFrame:
    rows = []
    for step, spans in enumerate(steps):
        for i, s in enumerate(spans):
            share = s.attributed_ns / s.duration_ns if s.duration_ns > 0 else 0.0
            corrected = max(0.0, s.attributed_ns - s.tracing_events * cost * share)
            root = s.level == "model"
            rows.append(
                {
                    "step": step,
                    "id": i,
                    "parent": s.parent,
                    "level": s.level,
                    "name": s.name,
                    "type": s.type,
                    "start_ns": s.start_ns,
                    "end_ns": s.end_ns,
                    "raw_ns": s.duration_ns,
                    "attributed_ns": s.attributed_ns,
                    "corrected_ns": model_ns[step % len(model_ns)] if root else corrected,
                    "tracing_events": s.tracing_events,
                    "thread": s.thread,
                    "run": "A" if root else s.run,
                    "cpu_ns": s.cpu_ns,
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def profile(
    model_or_fn: Any,
    inputs: Any,
    *,
    levels: Sequence[str] = LEVELS,
    steps: int = 20,
    warmup: int = 5,
    logdir: str | os.PathLike[str] | None = None,
    run_name: str | None = None,
    model_name: str | None = None,
    otlp_endpoint: str | None = None,
    progress: TextIO | None = sys.stderr,
    min_confidence: float | None = None,
    time_limit: float = 300.0,
    reference: Callable[[], Any] | None = None,
) -> Profile:
    """Profiles `model_or_fn(*inputs)` level by level; returns the merged `Profile`.

    `levels` chooses the levels measured ("model" is always measured); the ones this platform
    cannot trace are listed in `meta["missing_levels"]` with the reason. With `logdir` the
    profile is saved under `<logdir>/plugins/tf_stitch/<run_name>/` and the TF profiler's
    xplane under `<logdir>/plugins/profile/<run_name>/` (XProf opens it, our levels as lines).
    `otlp_endpoint` (default `$OTEL_EXPORTER_OTLP_ENDPOINT`) also sends the span trees over
    OTLP/HTTP; an unreachable endpoint only warns. A model that fails raises `ProfileError`
    naming the run and level it failed in.

    Runs A and B alternate in blocks; `meta["stability"]` says whether the numbers are known
    to within 5% (95% bootstrap intervals over the blocks) and the machine was quiet. With
    `min_confidence` (a relative half-width, 0.03 for ±3%), blocks are added after `steps`
    until the model latency's and the traced step's intervals are that narrow, for at most
    `time_limit` seconds from the start.

    `reference`, a callable (the same model called another way, say), is timed untraced in a
    block of its own before each of run A's, so the machine's drift hits it as it hits the
    profile: `meta["reference_ns"]` (the median of its blocks' medians) is an independent
    check of the model latency and its interval (benchmarks/profiler_accuracy.py). It needs a
    traced level.
    """
    deadline = time.monotonic() + time_limit
    run = _check_arguments(
        model_or_fn, levels, steps, warmup, min_confidence, reference, run_name, logdir
    )
    args = _as_inputs(inputs)
    call, graph = _callable(model_or_fn, args)
    names = keras_layer_names(model_or_fn) if is_keras_model(model_or_fn) else None
    traced = [lv for lv in TRACED_LEVELS if lv in levels]
    if reference is not None and not traced:
        raise ValueError("reference is timed beside the traced runs: profile a traced level too")
    bar = Progress(4 if traced else 1, progress or io.StringIO(), "profile")
    before = stability.cpu_sample()
    block = max(2, steps // BLOCKS)
    meta = _new_meta(model_or_fn, model_name, args, traced, steps, warmup, block, run)
    enough = _narrow_enough(min_confidence)
    m = measure(call, names, traced, steps, warmup, block, bar, meta, enough, deadline, reference)
    model_blocks = leveled.block_medians(m.model_ns, m.model_block)
    model = stability.estimate(model_blocks)
    traced_estimate = _latency_and_overheads(meta, m, model, model_blocks, traced)
    spans = _span_table(m, meta, traced)
    meta["layer_types"] = _layer_types(model_or_fn) if is_keras_model(model_or_fn) else {}
    ops = op_table(graph) if isinstance(graph, tf.Graph) else None
    result = Profile(spans, meta, _fusion_groups(model_or_fn), ops, _decisions(model_or_fn))
    _layer_sums(meta, spans, m, model_blocks, bool(traced))
    contention = stability.Contention.between(before, stability.cpu_sample())
    verdict = stability.judge(model, model_blocks, traced_estimate, contention)
    meta["stability"] = verdict.as_meta()
    meta["stability"]["message"] = verdict.message()
    _store_and_send(result, m, logdir, run, otlp_endpoint)
    bar.update(bar.total, "done")
    return result


def _span_table(m: Measured, meta: ProfileMeta, traced: list[str]) -> pd.DataFrame:
    """The spans of every step as the profile's table; the traced levels that recorded
    nothing are moved to `meta["missing_levels"]`, with why."""
    if not m.steps_spans:  # model level only: one root span per step
        m.steps_spans = [[Span("model", str(meta["model"]), "step", 0.0, t)] for t in m.model_ns]
    spans = _rows(m.steps_spans, m.model_ns, m.cost)
    for lv in traced:
        if not (spans.level == lv).any():
            meta["levels"].remove(lv)
            meta["overheads"].pop(lv, None)
            meta["missing_levels"][lv] = _MISSING.get(lv, "nothing recorded at this level")
    return spans[spans.level.isin(meta["levels"])].reset_index(drop=True)


def _store_and_send(
    result: Profile, m: Measured, logdir: Any, run: str, otlp_endpoint: str | None
) -> None:
    """The profile and the first block's xplane into `logdir` (where given), its spans over
    OTLP (where an endpoint is)."""
    spans, meta = result.spans, result.meta
    # Steps' starts in ns since the epoch (for OTLP): the trace's, or now for run A alone.
    meta["step_start_ns"] = m.epoch_ns or [time.time_ns()] * len(m.steps_spans)
    if logdir is not None:
        result.save(logdir, run)
        if m.traces:  # the first block's session, with its steps' spans
            first = spans[spans.step < m.first_steps]
            _write_trace(m.traces, first, m.step_start_ps[: m.first_steps], Path(logdir), run)
    sent = export_otlp(spans, meta, meta["step_start_ns"], otlp_endpoint)
    if sent:
        meta["otlp_spans_sent"] = sent


def _check_arguments(
    model_or_fn: Any,
    levels: Sequence[str],
    steps: int,
    warmup: int,
    min_confidence: float | None,
    reference: Callable[[], Any] | None,
    run_name: str | None,
    logdir: str | os.PathLike[str] | None,
) -> str:
    """The run's name; TypeError or ValueError saying what is wrong with `profile`'s
    arguments (a logdir that cannot be written to among them)."""
    if not callable(model_or_fn):
        raise TypeError(f"profile needs a Keras model or a function, not {model_or_fn!r}")
    if isinstance(levels, str):
        raise TypeError(f"levels is a sequence of level names, not the string {levels!r}")
    unknown = [lv for lv in levels if lv not in LEVELS]
    if unknown:
        raise ValueError(f"unknown level(s) {unknown}; levels are {LEVELS}")
    if steps < 2 or warmup < 0:
        raise ValueError("need steps >= 2 and warmup >= 0")
    if reference is not None and not callable(reference):
        raise TypeError(f"reference must be a function of no arguments, not {reference!r}")
    if min_confidence is not None and not 0.0 < min_confidence < 1.0:
        raise ValueError(f"min_confidence is a relative half-width in (0, 1), not {min_confidence}")
    default_run = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    run = check_run_name(default_run if run_name is None else run_name)
    if logdir is not None:
        _writable(Path(logdir))
    return run


def _new_meta(
    model_or_fn: Any,
    model_name: str | None,
    args: list[Any],
    traced: list[str],
    steps: int,
    warmup: int,
    block: int,
    run: str,
) -> ProfileMeta:
    """The profile's `meta` before measuring: the model, the platform, the settings."""
    return {
        "model": model_name or getattr(model_or_fn, "name", None) or "function",
        "batch": int(args[0].shape[0]) if args and args[0].shape.rank else None,
        "device": f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs)",
        "tensorflow": tf.__version__,
        "tf_stitch": __version__,
        "autotuning": _pin_autotuning(),
        "levels": ["model", *traced],
        "steps": steps,
        "warmup": warmup,
        "trim": leveled.TRIM,
        "block_steps": block,
        "overheads": {},
        "missing_levels": {},
        "run": run,
    }


def _latency_and_overheads(
    meta: ProfileMeta,
    m: Measured,
    model: stability.Estimate,
    model_blocks: list[float],
    traced: list[str],
) -> list[stability.Estimate]:
    """The model latency and each traced level's overhead, with their intervals, into `meta`;
    returns the traced step's estimate (none without a traced level)."""
    meta["model_latency_ns"] = model.value  # the median of the blocks' medians
    meta["model_latency_ci_ns"] = [model.low, model.high]
    meta["blocks"] = len(model_blocks)
    meta["model_blocks_ns"] = model_blocks
    meta["traced_blocks_ns"] = m.traced_blocks
    meta["event_cost_ns"] = m.cost
    if not traced:
        return []
    # per pair of blocks (A then B): drift cancels in the ratio
    ratios = [t / a - 1.0 for t, a in zip(m.traced_blocks, model_blocks, strict=False)]
    overhead = stability.estimate(ratios)
    step = stability.estimate(m.traced_blocks)
    for lv in traced:
        if lv == "kernel" and m.run_c_ns is not None:
            meta["overheads"][lv] = {
                "run": "C",
                "latency_ns": m.run_c_ns,
                "overhead": m.run_c_ns / meta["model_latency_ns"] - 1.0,
            }
            continue
        meta["overheads"][lv] = {
            "run": "B",
            "latency_ns": step.value,
            "latency_ci_ns": [step.low, step.high],
            "overhead": overhead.value,
            "overhead_ci": [overhead.low, overhead.high],
        }
    return [step]


def _layer_sums(
    meta: ProfileMeta,
    spans: pd.DataFrame,
    m: Measured,
    model_blocks: list[float],
    traced: bool,
) -> None:
    """How the layers add up to the step (corrected, raw, with the interval over the blocks),
    how much of the step they cover, and the model's own layers' share, into `meta`."""
    layer = spans[spans.level == "layer"]
    per_step = layer.groupby("step")
    lat = meta["model_latency_ns"]
    meta["layer_sum_vs_model"] = _mean(per_step.corrected_ns.sum().tolist()) / lat
    meta["layer_sum_vs_model_raw"] = _mean(per_step.attributed_ns.sum().tolist()) / lat
    meta["layer_coverage"] = _mean([_covered(s) for s in m.steps_spans])
    model_layers = layer[layer.type != "framework"].groupby("step")
    meta["model_layers_vs_model"] = _mean(model_layers.corrected_ns.sum().tolist()) / lat
    if traced and not layer.empty:  # each B block's layer sum against its A block's latency
        steps = len(m.model_ns)
        sums = per_step.corrected_ns.sum().reindex(range(steps), fill_value=0.0).tolist()
        by_block = leveled.block_medians(sums, m.traced_block)
        shares = [s / a for s, a in zip(by_block, model_blocks, strict=False)]
        layer_sum = stability.estimate(shares)
        meta["layer_sum_vs_model_ci"] = [layer_sum.low, layer_sum.high]


def _narrow_enough(target: float | None) -> Callable[[leveled.Blocks], bool] | None:
    """Whether the blocks so far know the model latency and the traced step to `target`."""
    if target is None:
        return None

    def enough(blocks: leveled.Blocks) -> bool:
        a = leveled.block_medians(blocks.model_ns, blocks.model_block)
        b = leveled.block_medians(blocks.traced.step_ns, blocks.traced_block)
        if len(a) < 3:
            return False
        return max(stability.estimate(a).half_width, stability.estimate(b).half_width) <= target

    return enough


def _mean(values: list[float]) -> float:
    return leveled.trimmed_mean(values) if values else 0.0


def _covered(spans: list[Span]) -> float:
    """The share of a traced step its layer spans cover (their union over the step's length)."""
    root = spans[0].duration_ns
    covered = union_ns((s.start_ns, s.end_ns) for s in spans if s.level == "layer")
    return covered / root if root > 0 else 0.0


def _write_trace(
    traces: dict[str, bytes], spans: pd.DataFrame, step_start_ps: list[int], logdir: Path, run: str
) -> None:
    """The TF profiler's xplane files, with the profile's levels added as lines of the host
    plane, under `<logdir>/plugins/profile/<run>/` where XProf finds them (staged next to their
    place, then renamed)."""

    def fill(staging: Path) -> None:
        for name, data in traces.items():
            space = xplane_pb2.XSpace()
            space.ParseFromString(data)
            add_levels(space, spans, step_start_ps)
            (staging / name).write_bytes(space.SerializeToString())

    replace_dir(logdir / "plugins" / "profile" / run, fill)
