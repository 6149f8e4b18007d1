"""Generated kernels under AddressSanitizer and UndefinedBehaviorSanitizer
(`TF_STITCH_SANITIZE=address,undefined`, any finding fatal), run in a child process with the
sanitizer runtime preloaded: the numerics suite through the C++ kernels and through the CUDA
kernels' SIMT emulation, and a kernel with a deliberate out-of-bounds write that must be caught.

The default run takes a selection of the numerics cases (row, column, matmul-tile (with slices),
multi-output and mask kernels); `pytest -m slow tests/reliability/test_sanitizers.py` runs them
all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tf_stitch.runtime.kernel_compiler import sanitizer_flags

REPO = Path(__file__).resolve().parents[2]
# Row (layer_norm_gelu, masked_softmax), column (batch_norm_relu), matmul tiles
# (matmul_between, lstm_cell: slices of the tile too), several outputs, bool masks, attention.
SELECTION = (
    "layer_norm_gelu or masked_softmax or batch_norm_relu or matmul_between or two_outputs or "
    "where_compare or lstm_cell or attention"
)
# The SIMT emulation compiles slowly under the sanitizers: a smaller selection by default.
SIMT_SELECTION = "masked_softmax or matmul_between or two_outputs or attention"


def sanitizer_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    cxx = shutil.which(os.environ.get("CXX") or "c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    libs = []
    for name in ("libasan.so", "libstdc++.so"):  # libstdc++ first-hand, for ASan's __cxa_throw
        path = subprocess.run(
            [cxx, f"-print-file-name={name}"], capture_output=True, text=True, check=True
        ).stdout.strip()
        if not os.path.isabs(path):
            pytest.skip(f"{cxx} has no {name}")
        libs.append(path)
    return {
        **os.environ,
        "TF_STITCH_SANITIZE": "address,undefined",
        "TF_STITCH_CACHE_DIR": str(tmp_path / "sanitized_cache"),
        "LD_PRELOAD": " ".join(libs),
        "ASAN_OPTIONS": "detect_leaks=0",  # the interpreter's own allocations are not ours
        "UBSAN_OPTIONS": "print_stacktrace=1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        **extra,
    }


def run_numerics(tmp_path: Path, selection: str | None, **extra: str) -> None:
    args = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-n", "0"]
    args += ["tests/test_numerics.py", *(["-k", selection] if selection else [])]
    done = subprocess.run(
        args,
        cwd=REPO,
        env=sanitizer_env(tmp_path, **extra),
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert " passed" in done.stdout and "Sanitizer" not in output
    kernels = list((tmp_path / "sanitized_cache" / "kernels").glob("*/*.so"))
    assert kernels, "no kernel was compiled"
    needed = subprocess.run(["readelf", "-d", str(kernels[0])], capture_output=True, text=True)
    if needed.returncode == 0:
        assert "libasan" in needed.stdout and "libubsan" in needed.stdout


def test_numerics_selection_under_sanitizers(tmp_path: Path) -> None:
    run_numerics(tmp_path, SELECTION)


def test_numerics_selection_of_simt_kernels_under_sanitizers(tmp_path: Path) -> None:
    run_numerics(tmp_path, SIMT_SELECTION, TF_STITCH_KERNELS="simt")


@pytest.mark.slow
@pytest.mark.parametrize("kernels", ["cpu", "simt"])
def test_all_numerics_under_sanitizers(tmp_path: Path, kernels: str) -> None:
    run_numerics(tmp_path, None, TF_STITCH_KERNELS=kernels)


OUT_OF_BOUNDS = r"""
#include <cstdint>
extern "C" int ts_abi_version(void) { return 1; }
extern "C" void ts_run(const void* const* in, void* const* out, const int64_t* symbols,
                       int64_t begin, int64_t end) {
  const float* x = static_cast<const float*>(in[0]);
  float* y = static_cast<float*>(out[0]);
  for (int64_t i = begin * 5; i <= end * 5; ++i) y[i] = x[i] + 1.0f;  // one past the end
}
"""

_RUN_BROKEN = """
import numpy as np, sys
sys.path.insert(0, "tests")
from runtime.test_stitched_kernel_op import add_one_attrs
from tf_stitch.runtime import op_library
from tf_stitch.runtime.kernel_compiler import compile_kernel
key = compile_kernel(sys.argv[1]).key
op_library.load().stitched_kernel([np.ones((3, 5), np.float32)], **add_one_attrs(key))
print("NOT CAUGHT")
"""


def test_the_sanitizer_mode_catches_an_out_of_bounds_write(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _RUN_BROKEN, OUT_OF_BOUNDS],
        cwd=REPO,
        env=sanitizer_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode != 0 and "NOT CAUGHT" not in done.stdout
    assert "AddressSanitizer: heap-buffer-overflow" in done.stderr, done.stderr[-3000:]


def test_sanitizer_flags() -> None:
    assert sanitizer_flags("") == ()
    assert sanitizer_flags("address,undefined")[0] == "-fsanitize=address,undefined"
    assert "-fno-sanitize-recover=all" in sanitizer_flags("undefined")
    with pytest.raises(ValueError, match="TF_STITCH_SANITIZE takes"):
        sanitizer_flags("thread")
