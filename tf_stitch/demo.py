"""`tf-stitch demo`: a BERT-style encoder layer, optimized, checked, measured against TF/XLA."""

from __future__ import annotations

import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np


@dataclass
class DemoResult:
    max_abs_error: float
    outputs_match: bool
    kernels: dict[str, int | None]
    latency: dict[str, Any]
    stitched_kernels: int


def _cpu() -> str:
    return platform.processor() or platform.machine()


def _log(out: TextIO, text: str) -> None:
    print(text, file=out, flush=True)


def run(
    batch: int = 4,
    seq_len: int = 128,
    rounds: int = 10,
    out: TextIO = sys.stdout,
    export_dir: str | None = None,
) -> DemoResult:
    """Builds, optimizes, checks and measures the encoder layer; prints a report to `out`.
    With `export_dir`, also saves the (unoptimized) layer there as a SavedModel, replacing an
    earlier one, for `tf-stitch convert` to work on."""
    import tensorflow as tf

    import tf_stitch
    from tf_stitch.models.encoder import encoder_layer
    from tf_stitch.profiler.measure.timing import interleaved
    from tf_stitch.progress import Progress

    started = time.perf_counter()
    _log(
        out,
        f"tf_stitch demo: BERT-style encoder layer, batch {batch}, sequence {seq_len}, "
        "hidden 768, 12 heads, FFN 3072 (random weights)",
    )
    model = encoder_layer(seq_len=seq_len)
    spec = [tf.TensorSpec([None, seq_len, 768], tf.float32)]
    _log(out, "  optimizing (compiles kernels on first use)...")
    optimized = tf_stitch.optimize(model, input_signature=spec)
    _log(out, f"  {len(optimized.kernels)} stitched kernels")

    x = tf.random.stateless_normal([batch, seq_len, 768], seed=[1, 2])
    reference = model(x, training=False).numpy()
    got = optimized(x).numpy()
    err = float(np.max(np.abs(reference - got)))
    ok = bool(np.allclose(reference, got, rtol=1e-4, atol=1e-4))
    _log(
        out,
        f"  outputs vs. the original model: max |diff| = {err:.2e} "
        f"({'match' if ok else 'MISMATCH'} at rtol=atol=1e-4)",
    )

    _log(out, "  counting kernels per step from profiler traces and XLA's optimized HLO...")
    report = tf_stitch.count_launches(optimized, x)

    def call(*args: Any) -> Any:
        return model(args[0], training=False)

    tf_fn = tf.function(call)
    xla_fn = tf.function(call, jit_compile=True)
    fns = {
        "TensorFlow": lambda: tf_fn(x),
        "XLA:CPU": lambda: xla_fn(x),
        "tf_stitch": lambda: optimized(x),
    }
    latency = interleaved(fns, rounds=rounds, warmup=2, progress=Progress(1, out, "  timing"))

    kernels = {"TensorFlow": report.tf, "XLA:CPU": report.xla_cpu, "tf_stitch": report.tf_stitch}
    _table(out, kernels, latency, report.notes)
    if export_dir is not None:
        export(model, Path(export_dir))
        _log(
            out,
            f"saved the encoder layer as a SavedModel in {export_dir}; stitch it with "
            f"`tf-stitch convert {export_dir} {export_dir}_stitched`",
        )
    _log(
        out,
        f"({rounds} interleaved rounds; {platform.node()}, {_cpu()}; "
        f"{time.perf_counter() - started:.0f} s in all)",
    )
    return DemoResult(err, ok, kernels, latency, len(optimized.kernels))


def _table(
    out: TextIO, kernels: dict[str, int | None], latency: dict[str, Any], notes: list[str]
) -> None:
    """Kernels per step and latency of each, and tf_stitch's speedups."""
    _log(out, "")
    _log(out, f"{'':12}{'kernels/step':>14}{'median latency (min-max)':>30}")
    for name in latency:
        k = kernels[name]
        _log(out, f"{name:12}{'n/a' if k is None else k:>14}{latency[name]!s:>30}")
    base = latency["TensorFlow"].median_ms
    _log(
        out,
        f"tf_stitch vs TensorFlow: {base / latency['tf_stitch'].median_ms:.2f}x faster; "
        f"vs XLA:CPU: {latency['XLA:CPU'].median_ms / latency['tf_stitch'].median_ms:.2f}x",
    )
    for note in notes:
        _log(out, f"note: {note}")


def export(model: Any, directory: Path) -> None:
    """Saves a Keras model as a SavedModel (signature `serving_default`) in `directory`, which
    appears whole or not at all."""
    from tf_stitch.runtime.cache import replace_dir

    replace_dir(
        directory,
        lambda staging: model.export(str(staging), format="tf_saved_model", verbose=False),
    )
