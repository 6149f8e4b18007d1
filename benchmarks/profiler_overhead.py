"""What leveled profiling costs and how well its layers add up: ResNet50 and a BERT-style
encoder layer on this CPU, profiled with `tf_stitch.profile`.

    python benchmarks/profiler_overhead.py [--steps 20] [--batch 4]

Prints, per model: run A's model latency (untraced), run B's (host tracer: layers, ops, library
work) and the overhead, the measured cost of one trace event, and how close the layer times
add up to run A's latency, raw and corrected (the issue's target: within 5%), and how much of
the traced step the layer spans cover.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tensorflow as tf

import tf_stitch
from tf_stitch.bench.report import run_header


def _models(batch: int) -> dict[str, tuple[object, tf.Tensor]]:
    import keras

    from tf_stitch.models.encoder import encoder_layer

    keras.utils.set_random_seed(0)
    resnet = keras.applications.ResNet50(weights=None)
    return {
        f"ResNet50 [{batch},224,224,3]": (resnet, tf.random.normal([batch, 224, 224, 3])),
        f"BERT-style encoder layer [{batch},128,768]": (
            encoder_layer(seq_len=128),
            tf.random.normal([batch, 128, 768]),
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=4)
    args = parser.parse_args()
    _, header = run_header(f"{args.steps} steps per run")
    print(header)
    for name, (model, x) in _models(args.batch).items():
        p = tf_stitch.profile(model, x, steps=args.steps, progress=None)
        m = p.meta
        traced = m["overheads"]["op"]
        print(f"\n{name}")
        print(f"  run A (untraced) model latency  {m['model_latency_ns'] / 1e6:9.2f} ms")
        print(
            f"  run B (layers, ops, library)    {traced['latency_ns'] / 1e6:9.2f} ms "
            f"(overhead {traced['overhead']:+.1%})"
        )
        print(f"  one trace event costs           {m['event_cost_ns']:9.0f} ns")
        print(
            f"  layer sum / run A, raw          {m['layer_sum_vs_model_raw']:9.1%} "
            f"(error {m['layer_sum_vs_model_raw'] - 1:+.1%})"
        )
        print(
            f"  layer sum / run A, corrected    {m['layer_sum_vs_model']:9.1%} "
            f"(error {m['layer_sum_vs_model'] - 1:+.1%}; target within 5%)"
        )
        print(f"  model's own layers / run A      {m['model_layers_vs_model']:9.1%}")
        print(f"  layer spans cover the step      {m['layer_coverage']:9.1%}")
        top = p.table("layer").head(3)
        print(
            "  top layers: "
            + ", ".join(
                f"{r.name} {r.corrected_ns / 1e6:.2f} ms ({r.share:.0%})" for r in top.itertuples()
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
