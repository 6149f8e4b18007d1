"""Names shared by the plugin and the writers of its data (the profiler, `tf-stitch bench`): one
owner of where runs are kept, what their files are called, the levels of a profile and which
run names are valid, so that whatever the profiler writes the tab can open. Imports nothing
heavy: the profiler imports it, and TensorBoard does at start."""

from __future__ import annotations

import os
import re

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
