"""The main of BUILD's py_test targets: pytest on the test files Bazel passes (`bazel test`).

The checkout's pyproject.toml (in the test's data) configures pytest as for `pytest` itself, but
with one worker: Bazel runs the test targets side by side. Bazel's sandbox leaves only the
test's own temporary folder writable: the kernel cache and Matplotlib's go there.
"""

from __future__ import annotations

import os
import sys

import pytest

if __name__ == "__main__":
    scratch = os.environ.get("TEST_TMPDIR")
    if scratch:
        os.environ.setdefault("TF_STITCH_CACHE_DIR", os.path.join(scratch, "tf_stitch_cache"))
        os.environ.setdefault("MPLCONFIGDIR", os.path.join(scratch, "matplotlib"))
    sys.exit(pytest.main(["-p", "no:cacheprovider", "-n", "0", *sys.argv[1:]]))
