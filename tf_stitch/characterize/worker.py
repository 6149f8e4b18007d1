"""One model of a characterization, run in its own process: build it (random weights), measure
the machine's peaks, profile it at each batch size (every level at the first, the model level at
the others), optimize it with tf_stitch and profile that too, check the optimized outputs, and
write the profiles and then the model's record into the logdir.

`python -m tf_stitch.characterize.worker '<json>'` (the campaign starts it so); the record says
`status: ok` or `failed` with the stage and the error. A failure after the base profile (the
optimizer, its profile) is kept in the record as `optimize_error` and the model still counts.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
import tempfile
import time
import traceback
from typing import Any

import numpy as np
import tensorflow as tf

from tf_stitch.characterize import storage
from tf_stitch.profiler.trace.spans import LEVELS

TOLERANCE = dict(rtol=1e-3, atol=1e-4)  # of the optimized outputs, scaled by the output's size


def run_name(model: str, batch: int, stitched: bool = False) -> str:
    return f"{storage.safe_name(model)}_b{batch}" + ("_stitched" if stitched else "")


def _log(message: str) -> None:
    print(f"[{datetime.datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def _is_keras(model: Any) -> bool:
    return hasattr(model, "layers") and hasattr(model, "inputs")


def _call(model: Any, inputs: list[Any]) -> Any:
    if _is_keras(model):
        return model(inputs[0] if len(inputs) == 1 else inputs, training=False)
    return model(*inputs)


def _optimize(model: Any, inputs: list[Any]) -> Any:
    import tf_stitch

    specs = [tf.TensorSpec.from_tensor(x) for x in inputs]
    if _is_keras(model):
        return tf_stitch.optimize(model, input_signature=specs)
    return tf_stitch.optimize(tf.function(model).get_concrete_function(*specs))


def compare_outputs(expected: Any, actual: Any) -> dict[str, Any]:
    """Max absolute difference and whether every output is within tolerance (NaN where NaN)."""
    worst, match = 0.0, True
    for e, a in zip(tf.nest.flatten(expected), tf.nest.flatten(actual), strict=True):
        e, a = np.asarray(e, np.float64), np.asarray(a, np.float64)
        if e.shape != a.shape:
            return {"outputs_match": False, "max_abs_diff": None, "why": "shapes differ"}
        scale = float(np.nanmax(np.abs(e))) if e.size and not np.isnan(e).all() else 1.0
        ok = np.allclose(
            a, e, rtol=TOLERANCE["rtol"], atol=TOLERANCE["atol"] * max(1.0, scale), equal_nan=True
        )
        finite = np.isfinite(e) & np.isfinite(a)
        if finite.any():
            worst = max(worst, float(np.max(np.abs(a[finite] - e[finite]))))
        match = match and bool(ok)
    return {"outputs_match": match, "max_abs_diff": worst}


def characterize_model(
    spec: str,
    batch_sizes: list[int],
    logdir: str,
    *,
    steps: int = 10,
    warmup: int = 3,
    optimize: bool = True,
    otlp_endpoint: str | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Profiles one model into `logdir` and returns its record (also written there, last)."""
    import tf_stitch
    from tf_stitch import zoo
    from tf_stitch.profiler.measure.peaks import measure_peaks

    started = time.time()
    record: dict[str, Any] = {
        "model": spec,
        "status": "failed",
        "stage": "build",
        "batch_sizes": batch_sizes,
        "runs": {},
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": f"{platform.node()} ({platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs)",
        "tensorflow": tf.__version__,
        "steps": steps,
        "warmup": warmup,
    }
    kw: dict[str, Any] = dict(
        steps=steps, warmup=warmup, otlp_endpoint=otlp_endpoint, progress=None
    )
    earlier = storage.read_record(logdir, spec)
    if earlier and earlier.get("status") == "ok":  # keep the profiles it has (resuming)
        record["runs"] = {b: r for b, r in earlier.get("runs", {}).items() if int(b) in batch_sizes}
        record.update({k: earlier[k] for k in ("peaks",) if k in earlier})
        record["first_started"] = earlier.get("first_started", earlier.get("started"))
        record["earlier_wall_s"] = earlier.get("wall_s", 0.0) + earlier.get("earlier_wall_s", 0.0)
    with tempfile.TemporaryDirectory(prefix="tf_stitch_characterize_") as local:
        try:
            entry = zoo.get(spec)
            record.update(
                family=entry.family, description=entry.description, inputs=entry.inputs_text()
            )
            _log(f"{spec}: building")
            built = entry.build(seed)
            record["stage"] = "peaks"
            if "peaks" not in record:
                record["peaks"] = measure_peaks(matmul_n=1536, copy_mib=128, rounds=5)
            for i, batch in enumerate(batch_sizes):
                if str(batch) in record["runs"]:
                    continue
                record["stage"] = f"profile (batch {batch})"
                _log(f"{spec}: profiling at batch {batch}")
                inputs = built.make_inputs(batch, seed)
                levels = LEVELS if i == 0 else ("model",)
                name = run_name(spec, batch)
                tf_stitch.profile(
                    built.model,
                    inputs,
                    levels=levels,
                    logdir=local,
                    run_name=name,
                    model_name=spec,
                    **kw,
                )
                record["runs"][str(batch)] = name
        except Exception as e:  # the record says where and why; the campaign goes on
            record["error"] = f"{type(e).__name__}: {e}"[:4000]
            record["traceback"] = traceback.format_exc()[-4000:]
            _log(f"{spec}: failed in {record['stage']}: {record['error'][:300]}")
        else:
            record["status"], record["stage"] = "ok", "done"
            if optimize:
                _stitched(spec, built, batch_sizes[0], seed, local, kw, record)
        record["wall_s"] = time.time() - started
        storage.copy_tree(local, logdir)
    storage.write_record(logdir, record)
    return record


def _stitched(
    spec: str,
    built: Any,
    batch: int,
    seed: int,
    local: str,
    kw: dict[str, Any],
    record: dict[str, Any],
) -> None:
    """Optimizes the model at `batch`, checks its outputs, profiles it (op and kernel levels)."""
    import tf_stitch

    inputs = built.make_inputs(batch, seed)
    try:
        _log(f"{spec}: optimizing")
        t0 = time.perf_counter()
        optimized = _optimize(built.model, inputs)
        record["optimize_s"] = time.perf_counter() - t0
        record["stitched_kernels"] = len(optimized.kernels)
        record.update(compare_outputs(_call(built.model, inputs), optimized(*inputs)))
        _log(f"{spec}: profiling the optimized model ({len(optimized.kernels)} kernels)")
        name = run_name(spec, batch, stitched=True)
        tf_stitch.profile(
            optimized,
            inputs,
            levels=("model", "op", "kernel"),
            logdir=local,
            run_name=name,
            model_name=f"{spec} (tf_stitch)",
            **kw,
        )
        record["stitched_run"] = name
    except Exception as e:
        record["optimize_error"] = f"{type(e).__name__}: {e}"[:4000]
        _log(f"{spec}: tf_stitch failed: {record['optimize_error'][:300]}")


def main(argv: list[str]) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = json.loads(argv[0])
    record = characterize_model(**args)
    return 0 if record["status"] == "ok" else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
