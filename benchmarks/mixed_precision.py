"""Mixed precision, held out: kernels per step of a BERT-style encoder and ResNet50 under
float32, `mixed_float16` and `mixed_bfloat16`, and their outputs against TensorFlow's.

    python benchmarks/mixed_precision.py [--only encoder,resnet50] [--no-xla-gpu]
        [--json out.json]

The models are built from configuration with public code under each Keras dtype policy:
keras_hub's `BertBackbone` (4 layers, hidden 256, 4 heads, sequence 128, batch 2) and
keras.applications' ResNet50 (224x224, batch 1), seeded weights, nothing downloaded. For each,
`count_launches` gives the StitchedKernel launches per step, the ops per step on this CPU and the
GPU model's count of the graph optimized for a GPU; XLA:GPU's kernels for the same function come
from its optimized module compiled for a deviceless H100 (both GEMM backends; the smaller is
compared). Outputs are compared with TensorFlow's own run of the same function at the policy:
the largest |got - want| / (1 + |want|).

Prints a table and the issue's targets (issue 22): stitched kernels per step within 10% of the
float32 version's, the GPU model's count at most XLA:GPU's, outputs within the half tolerance
(1e-2 for float16, 6e-2 for bfloat16).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import tensorflow as tf

POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")
TOLERANCE = {"float32": 1e-4, "mixed_float16": 1e-2, "mixed_bfloat16": 6e-2}
KERNEL_SPREAD = 0.10  # stitched kernels per step within 10% of float32's


@dataclass
class Row:
    model: str
    policy: str
    stitched: int  # StitchedKernel launches per step (this CPU)
    cpu_ops: int  # every op launched per step on this CPU
    gpu_model: int | None
    xla_gpu: int | None  # the smaller of XLA:GPU's two GEMM backends
    error: float


def _encoder(seed: int) -> tuple[Any, list[tf.TensorSpec], list[tf.Tensor], Any]:
    import keras
    import keras_hub

    keras.utils.set_random_seed(seed)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=1000,
        num_layers=4,
        num_heads=4,
        hidden_dim=256,
        intermediate_dim=1024,
        max_sequence_length=128,
    )
    rng = np.random.default_rng(seed)
    tokens = tf.constant(rng.integers(0, 1000, [2, 128]), tf.int32)
    mask = tf.ones([2, 128], tf.int32)
    segments = tf.zeros([2, 128], tf.int32)

    def fn(t: tf.Tensor, m: tf.Tensor, s: tf.Tensor) -> Any:
        out = backbone({"token_ids": t, "padding_mask": m, "segment_ids": s}, training=False)
        return tf.cast(out["sequence_output"], tf.float32)

    spec = tf.TensorSpec([None, 128], tf.int32)
    return fn, [spec] * 3, [tokens, mask, segments], backbone


def _resnet50(seed: int) -> tuple[Any, list[tf.TensorSpec], list[tf.Tensor], Any]:
    import keras

    from benchmarks.model_builders import calibrate_batch_norm, trained_like

    keras.utils.set_random_seed(seed)
    model = keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3))
    trained_like(model, seed)
    calibrate_batch_norm(
        model, [tf.random.stateless_uniform([4, 224, 224, 3], [seed + 1, 0], 0.0, 255.0)]
    )
    x = tf.random.stateless_uniform([1, 224, 224, 3], [seed, 0], 0.0, 255.0)

    def fn(x: tf.Tensor) -> Any:
        return tf.cast(model(x, training=False), tf.float32)

    return fn, [tf.TensorSpec([None, 224, 224, 3])], [x], model


MODELS = {"encoder": _encoder, "resnet50": _resnet50}


def measure(name: str, policy: str, xla_gpu: bool) -> Row:
    import keras

    import tf_stitch

    keras.mixed_precision.set_global_policy(policy)
    try:
        fn, signature, inputs, _model = MODELS[name](0)
        original = tf.function(fn, input_signature=signature)
        optimized = tf_stitch.optimize(original)
        want = original(*inputs).numpy()
        got = optimized(*inputs).numpy()
        error = float(np.max(np.abs(got - want) / (1.0 + np.abs(want))))
        report = tf_stitch.count_launches(original, *inputs)
        stitched = report.tf_stitch_detail.by_type.get("StitchedKernel", 0)
        xla = None
        if xla_gpu:
            from tf_stitch.profiler.xla_gpu import count_xla_gpu_launches

            counts = [
                count_xla_gpu_launches(original, inputs, triton_gemm=t).total for t in (True, False)
            ]
            xla = min(counts)
        return Row(name, policy, stitched, report.tf_stitch, report.tf_stitch_gpu, xla, error)
    finally:
        keras.mixed_precision.set_global_policy("float32")


def targets(rows: list[Row]) -> list[str]:
    lines = []
    for row in rows:
        base = next(r for r in rows if r.model == row.model and r.policy == "float32")
        if row.policy != "float32":
            spread = abs(row.stitched - base.stitched) / max(base.stitched, 1)
            met = "met" if spread <= KERNEL_SPREAD else "NOT met"
            lines.append(
                f"{row.model} {row.policy}: stitched kernels {row.stitched} vs float32's "
                f"{base.stitched} ({spread:.0%}, target <= {KERNEL_SPREAD:.0%}): {met}"
            )
        if row.xla_gpu is not None and row.gpu_model is not None:
            met = "met" if row.gpu_model <= row.xla_gpu else "NOT met"
            lines.append(
                f"{row.model} {row.policy}: GPU model {row.gpu_model} vs XLA:GPU {row.xla_gpu}: "
                f"{met}"
            )
        met = "met" if row.error <= TOLERANCE[row.policy] else "NOT met"
        lines.append(
            f"{row.model} {row.policy}: output error {row.error:.2e} "
            f"(tolerance {TOLERANCE[row.policy]:g}): {met}"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(MODELS), help="models, comma-separated")
    parser.add_argument("--no-xla-gpu", action="store_true", help="skip XLA:GPU's counts")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        parser.error(f"unknown models {unknown}; choose from {sorted(MODELS)}")
    from tf_stitch.bench.report import run_header

    print(run_header("mixed precision")[1])
    rows = []
    print("| model | policy | stitched kernels | CPU ops | GPU model | XLA:GPU | output error |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        for policy in POLICIES:
            row = measure(name, policy, not args.no_xla_gpu)
            rows.append(row)
            xla = "n/a" if row.xla_gpu is None else row.xla_gpu
            print(
                f"| {row.model} | {row.policy} | {row.stitched} | {row.cpu_ops} | "
                f"{row.gpu_model} | {xla} | {row.error:.1e} |",
                flush=True,
            )
    print("\n".join(targets(rows)))
    if args.json:
        tmp = Path(args.json).with_suffix(".tmp")
        tmp.write_text(json.dumps([asdict(r) for r in rows], indent=1))
        tmp.replace(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
