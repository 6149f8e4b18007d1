"""Names shared by the plugin and the writers of its data (the profiler, `tf-stitch bench`): one
owner of where runs are kept, what their files are called, the levels of a profile, which run
names are valid and what a profile's `meta` holds, so that whatever the profiler writes the tab
can open. Imports nothing
heavy: the profiler imports it, and TensorBoard does at start."""

from __future__ import annotations

import os
import re
from typing import Any, TypedDict

PLUGIN_NAME = "tf_stitch"
# Benchmark runs keep their data under <logdir>/<run>/plugins/tf_stitch/; profiles under
# <logdir>/plugins/tf_stitch/<run>/ (next to XProf's <logdir>/plugins/profile/<run>/).
PLUGIN_DIR = "plugins/tf_stitch"
PROFILES_DIR = PLUGIN_DIR  # below the logdir itself, one folder per profile run

# A profile's levels, outermost first.
LEVELS = ("model", "layer", "op", "library", "kernel")
# The files of a profile run.
PROFILE_META, PROFILE_SPANS, PROFILE_TRACE = "meta.json", "spans.jsonl.gz", "trace.json.gz"
PROFILE_KERNELS = "kernels.json"  # the fusion groups of a profiled tf_stitch-optimized graph
PROFILE_OPS = "ops.json.gz"  # the graph's nodes with shapes, for the cost analyses
PROFILE_DECISIONS = "decisions.json"  # an optimized graph's fusion decisions (explain()'s)
BENCH_FILE = "bench.json"

MAX_RUN_NAME = 255
# A path separator, a NUL, "..", empty or ".", or a drive ("C:"): not one entry of a folder.
_BAD_NAME = re.compile(r"[/\\\x00]|\.\.|^\.?$|^[A-Za-z]:")


def run_name_problem(name: str) -> str:
    """Why `name` cannot name a run (one entry directly inside a folder, on any system), or ""
    if it can."""
    if len(name) > MAX_RUN_NAME:
        return f"it is longer than {MAX_RUN_NAME} characters"
    if _BAD_NAME.search(name) or os.path.isabs(name):
        return "it must not be empty, '.', contain '..' or a path separator, or name a drive"
    return ""


class LevelOverhead(TypedDict, total=False):
    """What tracing a level costs: its run's step latency against the untraced model's."""

    run: str  # "B" (the traced run) or "C" (the kernels' run of an optimized graph)
    latency_ns: float
    latency_ci_ns: list[float]  # 95% confidence interval over blocks
    overhead: float  # latency / model latency - 1
    overhead_ci: list[float]


class ProfileMeta(TypedDict, total=False):
    """A profile's `meta` (`Profile.meta`, `meta.json`): every key the profiler writes and the
    tab, the exports and the analyses read. A JSON object, so a TypedDict: `p.meta["steps"]`
    reads as it always has, and mypy checks every key and its type."""

    # What was profiled, where, how (set before measuring)
    model: str
    batch: int | None
    device: str
    tensorflow: str
    tf_stitch: str
    autotuning: str
    run: str
    levels: list[str]  # the levels measured, outermost first (a subset of LEVELS)
    missing_levels: dict[str, str]  # a level asked for but not recorded -> why
    steps: int
    warmup: int
    trim: float
    block_steps: int
    # Run A, the model level: the untraced latency, its blocks and its interval
    model_latency_ns: float
    model_latency_ci_ns: list[float]
    blocks: int
    model_blocks_ns: list[float]
    traced_blocks_ns: list[float]
    event_cost_ns: float  # the measured cost of one trace event
    overheads: dict[str, LevelOverhead]  # per traced level
    # CPU time beside wall time, and an independent reference timing where one was given
    model_cpu_ns: float
    cpu_per_wall: float
    thread_cpu: dict[str, dict[str, float]]
    reference_ns: float
    reference_blocks_ns: list[float]
    # The layers against the step
    layer_sum_vs_model: float
    layer_sum_vs_model_raw: float
    layer_sum_vs_model_ci: list[float]
    layer_coverage: float
    model_layers_vs_model: float
    layer_types: dict[str, str]  # layer name -> its Keras class
    stability: dict[str, Any]  # stability.Verdict.as_meta(), with its "message"
    step_start_ns: list[int]  # wall clock of each traced step's start (the exports' epoch)
    otlp_spans_sent: int
