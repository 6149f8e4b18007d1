"""The xplane.pb a profile leaves in the logdir is read by XProf's own converter: its trace
viewer shows our levels as lines (layer, op and kernel events among them), and its framework
op statistics list our ops."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tensorflow as tf

import tf_stitch
from tf_stitch.profiler.export.xplane_levels import LINE_PREFIX

raw_to_tool_data = pytest.importorskip("xprof.convert.raw_to_tool_data")


def _fn(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    h = tf.nn.relu(tf.matmul(x, w))
    return tf.nn.softmax(h - tf.reduce_mean(h, -1, keepdims=True))


def test_xprof_reads_our_levels_and_ops(tmp_path: Path) -> None:
    import keras

    keras.utils.set_random_seed(0)
    inp = keras.Input((64,))
    h = keras.layers.Dense(128, activation="relu", name="hidden")(inp)
    model = keras.Model(inp, keras.layers.LayerNormalization(name="norm")(h), name="mlp")
    x = tf.random.normal([256, 64])
    optimized = tf_stitch.optimize(model, input_signature=[tf.TensorSpec(x.shape, x.dtype)])
    p = tf_stitch.profile(
        optimized, x, steps=3, warmup=1, logdir=tmp_path, run_name="r", progress=None
    )
    (path,) = (tmp_path / "plugins" / "profile" / "r").glob("*.xplane.pb")

    data, _ = raw_to_tool_data.xspace_to_tool_data([str(path)], "trace_viewer", {})
    trace = json.loads(data)
    threads = {
        e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"
    }
    ours = {
        tid: name[len(LINE_PREFIX) :]
        for tid, name in threads.items()
        if name.startswith(LINE_PREFIX)
    }
    assert set(ours.values()) >= {"model", "layer", "op", "kernel"}
    seen: dict[str, set[str]] = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("tid") in ours:
            seen.setdefault(ours[e["tid"]].split(" ")[0], set()).add(e["name"])
    assert set(p.level("layer").name) <= seen["layer"]
    assert {k.name for k in optimized.kernels} <= seen["kernel"]
    assert {f"{r.name} ({r.type})" for r in p.level("op").itertuples()} <= seen["op"]

    stats, _ = raw_to_tool_data.xspace_to_tool_data([str(path)], "framework_op_stats", {})
    text = stats.decode() if isinstance(stats, bytes) else str(stats)
    kernel_ops = set(p.level("op")[p.level("op").type == "StitchedKernel"].name)
    assert kernel_ops and all(name.split("/")[-1] in text for name in kernel_ops)
