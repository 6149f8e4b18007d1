"""`tf_stitch.profile` on a small Keras CNN and a Keras transformer block, for real: the levels
this CPU has, one tree per step with every child inside its parent, layers covering the step,
the corrected layer sum against the untraced model latency, overheads, the store, bad input."""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path

import pandas as pd
import pytest
import tensorflow as tf

import tf_stitch
from tb_plugin import metadata
from tf_stitch.profiler.store.profile import META_FILE, SPANS_FILE, STORE_DIR

STEPS = 16


def _cnn() -> tuple[object, tf.Tensor]:
    import keras

    keras.utils.set_random_seed(0)
    inp = keras.Input((48, 48, 3))
    x = keras.layers.Conv2D(32, 3, activation="relu", name="conv1")(inp)
    x = keras.layers.BatchNormalization(name="bn1")(x)
    x = keras.layers.MaxPooling2D(name="pool1")(x)
    x = keras.layers.Conv2D(64, 3, activation="relu", name="conv2")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    y = keras.layers.Dense(10, activation="softmax", name="head")(x)
    return keras.Model(inp, y, name="small_cnn"), tf.random.normal([32, 48, 48, 3])


def _transformer_block() -> tuple[object, tf.Tensor]:
    import keras

    keras.utils.set_random_seed(1)
    inp = keras.Input((64, 128))
    a = keras.layers.MultiHeadAttention(4, 32, name="attention")(inp, inp)
    x = keras.layers.LayerNormalization(name="ln1")(inp + a)
    f = keras.layers.Dense(512, activation="gelu", name="ffn_in")(x)
    f = keras.layers.Dense(128, name="ffn_out")(f)
    y = keras.layers.LayerNormalization(name="ln2")(x + f)
    return keras.Model(inp, y, name="block"), tf.random.normal([16, 64, 128])


@functools.cache
def _profiled(which: str, logdir: str) -> tf_stitch.Profile:
    model, x = _cnn() if which == "cnn" else _transformer_block()
    return tf_stitch.profile(
        model, x, steps=STEPS, warmup=3, logdir=logdir, run_name=which, progress=None
    )


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("profiles"))


@pytest.mark.parametrize("which", ["cnn", "block"])
def test_levels_tree_coverage_and_overheads(which: str, logdir: str) -> None:
    p = _profiled(which, logdir)
    spans = p.spans
    assert p.meta["levels"] == ["model", "layer", "op", "library"]
    assert "kernel" in p.meta["missing_levels"]
    assert set(p.meta) <= set(metadata.ProfileMeta.__annotations__)  # the keys the tab declares
    for level in ("model", "layer", "op"):
        assert len(p.level(level)) > 0, level
    assert spans.step.nunique() == STEPS
    # One tree per step: a single root, every child inside its parent.
    for _, step in spans.groupby("step"):
        by_id = step.set_index("id")
        assert (step.parent == -1).sum() == 1
        children = step[step.parent >= 0]
        parents = by_id.loc[children.parent]
        assert (parents.start_ns.values <= children.start_ns.values + 1e-6).all()
        assert (children.end_ns.values <= parents.end_ns.values + 1e-6).all()
    # Layer spans cover the step; the corrected layer sum is close to the untraced latency.
    assert p.meta["layer_coverage"] >= 0.95
    # The layers add up to the step within the interval the profile computed over its blocks
    # (runs A and B interleaved; 5 points for the attribution), or it says it is unstable.
    low, high = p.meta["layer_sum_vs_model_ci"]
    assert low <= high and p.meta["blocks"] == len(p.meta["model_blocks_ns"])
    stable = not p.meta["stability"]["unstable"]
    assert not stable or low - 0.05 <= 1.0 <= high + 0.05, p.meta["stability"]
    assert p.meta["stability"]["message"] in str(p)
    # CPU time next to wall time: at most every CPU busy all the step
    assert p.meta["model_cpu_ns"] > 0 and 0 < p.meta["cpu_per_wall"] <= (os.cpu_count() or 1) + 0.5
    assert 0.0 < p.meta["event_cost_ns"] < 50_000
    for level in ("layer", "op", "library"):
        info = p.meta["overheads"][level]
        assert info["run"] == "B" and info["latency_ns"] > 0 and info["overhead"] > -0.5
    assert (p.level("model").run == "A").all() and (p.level("op").run == "B").all()
    traced = spans[spans.level != "model"]
    assert (traced.corrected_ns <= traced.raw_ns + 1e-6).all()


def test_layers_carry_keras_names_and_library_work_is_seen(logdir: str) -> None:
    p = _profiled("cnn", logdir)
    names = set(p.level("layer").name)
    assert {"conv1", "bn1", "pool1", "conv2", "gap", "head"} <= names
    lib = p.level("library")
    assert len(lib) > 0 and set(lib.type) <= {"oneDNN", "Eigen"}
    table = p.table("layer")
    assert list(table.columns) == [
        "name",
        "type",
        "calls_per_step",
        "raw_ns",
        "corrected_ns",
        "share",
    ]
    assert table.corrected_ns.is_monotonic_decreasing
    assert "ms per step" in str(p) and "conv2" in str(p)


def test_ops_have_cpu_time_from_their_threads_clocks(logdir: str) -> None:
    p = _profiled("cnn", logdir)
    if "thread_cpu" not in p.meta:
        pytest.skip("no per-thread CPU clocks here")
    on_thread = p.spans[p.spans.level.isin(["op", "library"])]
    assert on_thread.cpu_ns.notna().mean() > 0.9  # a line not matched to a thread: unknown
    known = on_thread.dropna(subset=["cpu_ns"])
    assert (known.cpu_ns >= 0).all()
    library = known[known.level == "library"]  # one thread each: at most its wall time
    assert (library.cpu_ns <= library.raw_ns + 1e-6).all()
    # An op's CPU time counts its library work's (every thread it used)
    children = library.groupby(["step", "parent"]).cpu_ns.sum()
    ops_by_id = known[known.level == "op"].set_index(["step", "id"]).cpu_ns
    parents = ops_by_id.reindex(children.index)
    assert len(children) > 0 and (parents >= children - 1e-6).all()
    ops = p.table("op")
    assert "cpu_ns" in ops.columns and (ops.cpu_ns > 0).any()
    everyone = p.meta["thread_cpu"]["all"]["on_cpu"]
    assert 0.0 < everyone <= 1.0 and "traced threads on a CPU" in str(p)


def test_saved_and_loaded(logdir: str) -> None:
    p = _profiled("block", logdir)
    stored = Path(logdir) / STORE_DIR / "block"
    assert (stored / SPANS_FILE).is_file() and (stored / META_FILE).is_file()
    assert list((Path(logdir) / "plugins" / "profile" / "block").glob("*.xplane.pb"))
    q = tf_stitch.Profile.load(logdir, "block")
    assert q.meta == json.loads(json.dumps(p.meta))
    pd.testing.assert_frame_equal(q.spans, p.spans, check_dtype=False)
    with pytest.raises(FileNotFoundError, match="no tf_stitch profile 'nope'"):
        tf_stitch.Profile.load(logdir, "nope")


def test_bad_input(tmp_path: Path) -> None:
    x = tf.ones([4])
    for bad in ("../up", "a/b", "..", ""):
        with pytest.raises(ValueError, match="invalid run name"):
            tf_stitch.profile(tf.nn.relu, x, run_name=bad, progress=None)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ValueError, match="not writable"):
        tf_stitch.profile(tf.nn.relu, x, logdir=blocker / "sub", progress=None)
    with pytest.raises(ValueError, match="unknown level"):
        tf_stitch.profile(tf.nn.relu, x, levels=("model", "warp"), progress=None)
    with pytest.raises(TypeError, match="not the string 'model'"):
        tf_stitch.profile(tf.nn.relu, x, levels="model", progress=None)
    with pytest.raises(TypeError, match="not 'notatensor'"):  # not split into characters
        tf_stitch.profile(tf.nn.relu, "notatensor", progress=None)
    with pytest.raises(TypeError, match="an input must be a tensor or an array, not None"):
        tf_stitch.profile(tf.nn.relu, [x, None], progress=None)
    with pytest.raises(TypeError, match="a Keras model or a function, not None"):
        tf_stitch.profile(None, x, progress=None)

    def fails(t: tf.Tensor) -> tf.Tensor:
        return tf.debugging.check_numerics(t / 0.0, "boom")

    with pytest.raises(tf_stitch.ProfileError, match=r"run A \(model level\).*boom"):
        tf_stitch.profile(fails, x, progress=None)
    assert not list(tmp_path.glob("**/*.jsonl.gz"))


def test_stitched_kernels_are_the_kernel_level(tmp_path: Path) -> None:
    model, x = _transformer_block()
    optimized = tf_stitch.optimize(model, input_signature=[tf.TensorSpec(x.shape, x.dtype)])
    p = tf_stitch.profile(optimized, x, steps=4, warmup=1, progress=None)
    assert p.meta["levels"] == ["model", "layer", "op", "library", "kernel"]
    assert "kernel" not in p.meta["missing_levels"]
    kernels = p.level("kernel")
    names = {k.name for k in optimized.kernels}
    assert set(kernels.name) == names  # every kernel ran in every step, once
    assert len(kernels) == 4 * len(names)
    by_id = p.spans.set_index(["step", "id"])
    parents = by_id.loc[list(zip(kernels.step, kernels.parent, strict=True))]
    assert set(parents.type) == {"StitchedKernel"} and set(parents.level) == {"op"}
    schedules = {k.name: k.schedule for k in optimized.kernels}
    assert all(row.type == schedules[row.name] for row in kernels.itertuples())
    assert (kernels.raw_ns > 0).all()
    # Kernels come from run C (their trace events on), grafted onto run B's ops by identity.
    assert set(kernels.run) == {"C"} and set(p.level("op").run) == {"B"}
    assert p.meta["overheads"]["kernel"]["run"] == "C"
    assert p.meta["overheads"]["op"]["run"] == "B"
    # Layers keep their scopes: the optimizer keeps the ops' names (under its import scope).
    assert {"attention_1", "ffn_in_1"} <= set(p.level("layer").name)
    # The optimized graph's function is called directly: no function-call op in the step, and
    # its nodes (with the StitchedKernels) are the profile's op table.
    assert not p.level("op").type.str.contains("PartitionedCall").any()
    assert set(p.level("op").name) <= set(p.ops.name)
    assert (p.ops.op == "StitchedKernel").sum() == len(names)


def test_min_confidence_adds_blocks_until_the_intervals_are_narrow_or_time_is_up() -> None:
    fn = tf.function(lambda t: tf.tanh(tf.matmul(t, t)) + 1.0)
    x = tf.random.normal([64, 64], seed=3)
    started = time.monotonic()
    plain = tf_stitch.profile(fn, x, steps=8, warmup=2, progress=None)
    took = time.monotonic() - started
    assert plain.meta["steps"] == 8 and plain.meta["blocks"] == 4  # blocks of 2
    # ±0.01% cannot be had here: blocks are added until the time limit, then it stops. The
    # limit counts from the start: three times what the plain profile took leaves room for
    # more blocks however busy the machine is.
    strict = tf_stitch.profile(
        fn, x, steps=8, warmup=2, progress=None, min_confidence=1e-4, time_limit=3 * took + 2
    )
    assert strict.meta["steps"] > 8 and strict.meta["blocks"] == strict.meta["steps"] // 2
    assert len(strict.meta["model_blocks_ns"]) == len(strict.meta["traced_blocks_ns"])
    assert strict.spans.step.nunique() == strict.meta["steps"]
    with pytest.raises(ValueError, match="min_confidence"):
        tf_stitch.profile(fn, x, progress=None, min_confidence=3.0)


def test_enough_blocks_is_judged_on_both_intervals() -> None:
    from tf_stitch.profiler.api import _narrow_enough
    from tf_stitch.profiler.measure.leveled import Blocks, TracedRun

    def blocks(a: list[float], b: list[float]) -> Blocks:
        ids = [i // 2 for i in range(len(a))]
        return Blocks(a, ids, a, TracedRun(b, [], [], []), ids, [], {}, 2)

    enough = _narrow_enough(0.03)
    assert enough is not None and _narrow_enough(None) is None
    steady = [1.0, 1.01, 0.99, 1.0, 1.005, 0.995]
    assert enough(blocks(steady, [x * 1.1 for x in steady]))
    assert not enough(blocks(steady[:4], steady[:4]))  # two blocks: too few to say
    assert not enough(blocks(steady, [1.0, 1.0, 1.5, 1.5, 1.0, 1.0]))  # the traced step is not


def test_a_reference_is_timed_in_blocks_beside_the_profile_s() -> None:
    """`reference` runs in a block of its own before each of run A's (R A B ...): an untraced
    timing that drifts with the profile, to check its interval against."""
    fn = tf.function(lambda t: tf.tanh(tf.matmul(t, t)) + 1.0)
    x = tf.random.normal([64, 64], seed=4)
    calls = []

    def reference() -> tf.Tensor:
        calls.append(1)
        return fn(x)

    p = tf_stitch.profile(fn, x, steps=8, warmup=2, progress=None, reference=reference)
    blocks = p.meta["blocks"]
    assert blocks == 4 and len(p.meta["reference_blocks_ns"]) == blocks
    assert len(calls) == 8 + blocks  # each block: one untimed call, then its steps
    low, high = min(p.meta["reference_blocks_ns"]), max(p.meta["reference_blocks_ns"])
    assert 0 < low <= p.meta["reference_ns"] <= high  # the median of the blocks' medians
    with pytest.raises(TypeError, match="reference"):
        tf_stitch.profile(fn, x, progress=None, reference="fn")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="traced level"):
        tf_stitch.profile(fn, x, levels=("model",), progress=None, reference=reference)
