"""The Chrome trace (Trace Event Format) export of a real profile: complete events with
pid/tid/ts/dur, tracks that never overlap, and flow events pairing each launch with its
kernel or library work."""

from __future__ import annotations

import functools
import gzip
import itertools
import json
from collections import defaultdict
from pathlib import Path

import tensorflow as tf

import tf_stitch
from tf_stitch.profiler.export.chrome import write_chrome_trace
from tf_stitch.profiler.store.profile import STORE_DIR, TRACE_FILE


def _fn(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    h = tf.nn.relu(tf.matmul(x, w))
    m = tf.reduce_mean(h, -1, keepdims=True)
    return tf.nn.softmax((h - m) * 2.0)


@functools.cache
def _profile(logdir: str) -> tf_stitch.Profile:
    x, w = tf.random.normal([512, 256]), tf.random.normal([256, 256])
    optimized = tf_stitch.optimize(tf.function(_fn).get_concrete_function(x, w))
    return tf_stitch.profile(
        optimized, [x, w], steps=3, warmup=1, logdir=logdir, run_name="r", progress=None
    )


def test_complete_events_on_tracks_that_never_overlap(tmp_path: Path) -> None:
    p = _profile(str(tmp_path))
    doc = p.chrome_trace()
    json.dumps(doc)  # plain JSON
    events = doc["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == len(p.spans)
    for e in complete:
        assert {"pid", "tid", "ts", "dur", "name", "cat"} <= set(e) and e["dur"] >= 0
    by_tid = defaultdict(list)
    for e in complete:
        by_tid[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    for slices in by_tid.values():
        slices.sort()
        assert all(
            a_end <= b_start + 1e-9 for (_, a_end), (b_start, _) in itertools.pairwise(slices)
        )
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"model", "layer", "op", "kernel"} <= {n.split(" ")[0] for n in names}
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in complete if e["cat"] == "model")
    assert len(steps) == 3 and all(a[1] < b[0] for a, b in itertools.pairwise(steps))


def test_flows_pair_each_launch_with_its_kernel(tmp_path: Path) -> None:
    p = _profile(str(tmp_path))
    events = p.chrome_trace()["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    flows = defaultdict(dict)
    for e in events:
        if e["ph"] in ("s", "f"):
            flows[e["id"]][e["ph"]] = e
    launched = [e for e in complete if e["cat"] in ("kernel", "library")]
    assert len(flows) == len(launched) and any(e["cat"] == "kernel" for e in launched)
    for pair in flows.values():
        s, f = pair["s"], pair["f"]
        assert f["bp"] == "e" and s["cat"] == f["cat"] == "launch" and s["ts"] <= f["ts"] + 1e-9
        (op,) = [
            e
            for e in complete
            if e["tid"] == s["tid"]
            and e["cat"] == "op"
            and e["ts"] <= s["ts"] <= e["ts"] + e["dur"]
        ]
        (target,) = [e for e in complete if e["tid"] == f["tid"] and e["ts"] == f["ts"]]
        assert target["cat"] in ("kernel", "library")
        if target["cat"] == "kernel":
            assert op["args"]["type"] == "StitchedKernel"


def test_written_with_the_profile_and_on_request(tmp_path: Path) -> None:
    p = _profile(str(tmp_path))
    stored = tmp_path / STORE_DIR / "r" / TRACE_FILE
    doc = json.loads(gzip.decompress(stored.read_bytes()))
    assert len(doc["traceEvents"]) == len(p.chrome_trace()["traceEvents"])
    plain = tmp_path / "trace.json"
    write_chrome_trace(p.spans, p.meta, plain)
    assert json.loads(plain.read_text())["otherData"]["model"] == p.meta["model"]
