"""The GPU check script: its host-side arithmetic, its preparation and its skip path (this
machine has no GPU; on one with a GPU, `bash tests/gpu/run_on_gpu.sh` runs it for real)."""

from __future__ import annotations

import ctypes
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import check_gpu  # noqa: E402

from tf_stitch.runtime.cuda_compiler import find_nvcc  # noqa: E402


def test_without_a_gpu_the_check_says_why_and_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"cases": []}))

    def no_driver(name: str, *args: object, **kwargs: object) -> ctypes.CDLL:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", no_driver)
    assert check_gpu.main([str(tmp_path)]) == 0
    assert "GPU check skipped: cannot load the CUDA driver" in capsys.readouterr().out


def test_launch_sizes_match_the_op() -> None:
    blocks = {"launch": "blocks", "units": ["batch", 8], "row": [64]}
    elements = {"launch": "elements", "units": ["batch"], "row": [1000]}
    assert check_gpu.grid_size(blocks, 3) == 24
    assert check_gpu.grid_size(blocks, 1 << 20) == check_gpu.MAX_GRID_BLOCKS
    assert check_gpu.grid_size(elements, 3) == math.ceil(3000 / check_gpu.BLOCK_THREADS)
    assert check_gpu.grid_size(elements, 0) == 1


def test_outputs_are_compared_with_tolerance_and_nan_positions() -> None:
    assert check_gpu.max_error([1.0, 2.0], [1.0, 2.0 + 1e-5]) == 0.0
    assert check_gpu.max_error([1.0, 2.5], [1.0, 2.0]) == pytest.approx(0.5)
    assert check_gpu.max_error([math.nan, 1.0], [math.nan, 1.0]) == 0.0
    assert check_gpu.max_error([0.0], [math.nan]) == math.inf
    assert check_gpu.max_error([math.inf], [-math.inf]) == math.inf
    assert check_gpu.max_error([1.0], [1.0, 2.0]) == math.inf


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found")
def test_a_prepared_case_runs_through_the_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import prepare

    monkeypatch.setattr(prepare, "CASES", {"softmax": prepare.CASES["softmax"]})
    manifest = prepare.prepare(tmp_path)
    (case,) = manifest["cases"]
    assert len(case["fused"]) == 1 and len(case["unfused"]) >= 4
    for kernel in case["fused"] + case["unfused"]:
        assert (tmp_path / kernel["fatbin"]).stat().st_size > 0
        for t in kernel["inputs"] + kernel["outputs"]:
            dims = check_gpu.resolve(t["dims"], case["check_batch"])
            assert (tmp_path / t["file"]).stat().st_size == math.prod(dims) * 4
    result = subprocess.run(
        ["bash", str(HERE / "run_on_gpu.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "GPU check" in result.stdout


@pytest.mark.parametrize("name", ["bias_residual_layer_norm", "attention", "conv_swish_pool_nchw"])
def test_the_epilogue_and_attention_cases_run_on_the_simt_emulation(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernels of the library-epilogue, attention and NCHW cases, as the CUDA source the GPU
    check compiles, run through the SIMT emulation at the check batch: one fused kernel each,
    TensorFlow's values."""
    import numpy as np
    import prepare
    import tensorflow as tf

    import tf_stitch

    monkeypatch.setenv("TF_STITCH_KERNELS", "simt")
    fn, shapes, _ = prepare.CASES[name]
    specs = [tf.TensorSpec(s) for s in shapes]
    original = tf.function(fn, input_signature=specs)
    layout = "NCHW" if name in prepare.NCHW_CASES else "NHWC"
    optimized = tf_stitch.optimize(original, conv_layout=layout)
    (kernel,) = optimized.kernels
    assert "__global__" in kernel.source
    assert kernel.schedule.startswith("attention" if name == "attention" else "row")
    rng = np.random.default_rng(0)
    dims = [[prepare.CHECK_BATCH if d is None else d for d in s] for s in shapes]
    xs = [tf.constant(rng.standard_normal(d).astype(np.float32)) for d in dims]
    for got, expected in zip(
        tf.nest.flatten(optimized(*xs)), tf.nest.flatten(original(*xs)), strict=True
    ):
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5)


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found")
def test_16_and_64_bit_cases_are_prepared_in_their_format_and_decoded_by_the_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 16-bit cases' tensors are written 2 bytes a value, the float64 case's 8; the script
    (standard library only) decodes them to the values TensorFlow computed and judges them by
    the format's tolerance."""
    import numpy as np
    import prepare

    names = ("layer_norm_gelu_f16", "scaled_masked_softmax_bf16", "rms_norm_f64")
    half = {n: prepare.CASES[n] for n in names}
    monkeypatch.setattr(prepare, "CASES", half)
    manifest = prepare.prepare(tmp_path)
    for case in manifest["cases"]:
        assert len(case["fused"]) == 1
        for kernel in case["fused"] + case["unfused"]:
            for t in kernel["inputs"] + kernel["outputs"]:
                raw = (tmp_path / t["file"]).read_bytes()
                n = math.prod(check_gpu.resolve(t["dims"], case["check_batch"]))
                assert len(raw) == n * check_gpu._ITEMSIZE[t["dtype"]]
                if t["dtype"] in ("float16", "bfloat16"):
                    bits = np.frombuffer(raw, "<u2").astype(np.uint32)
                    want = (
                        np.frombuffer(raw, "<f2").astype(np.float32)
                        if t["dtype"] == "float16"
                        else (bits << 16).view(np.float32)
                    )
                    assert check_gpu.values(raw, t["dtype"]) == want.tolist()
                if t["dtype"] == "float64":
                    want64 = np.frombuffer(raw, "<f8")
                    assert check_gpu.values(raw, t["dtype"]) == want64.tolist()
    assert check_gpu.max_error([1.005], [1.0], check_gpu.TOLERANCE["float16"]) == 0.0
    assert check_gpu.max_error([1.05], [1.0], check_gpu.TOLERANCE["float16"]) > 0.0
