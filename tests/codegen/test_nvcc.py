"""Every CUDA kernel generated for the test graphs and the benchmark workloads compiles with nvcc
for sm_80 and sm_90 (in the default run the largest kernel of each workload's small variant, all
kernels of the full workloads with `pytest -m slow`); skipped where nvcc is absent."""

from __future__ import annotations

import struct
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import tensorflow as tf
from test_numerics import CASES

import tf_stitch
from tf_stitch.runtime import cuda_compiler
from tf_stitch.runtime.cuda_compiler import NvccMissing, compile_fatbin, find_nvcc

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found")
EM_CUDA = 190


def cubin_architectures(fatbin: Path) -> set[str]:
    """The SM versions of the ELF cubins inside a fatbin (EM_CUDA, the SM in e_flags)."""
    data, found, i = fatbin.read_bytes(), set(), 0
    while (i := data.find(b"\x7fELF", i)) >= 0:
        if struct.unpack_from("<H", data, i + 18)[0] == EM_CUDA:
            found.add(f"sm_{(struct.unpack_from('<I', data, i + 48)[0] >> 8) & 0xFF}")
        i += 4
    return found


def _compile_all(sources: dict[str, str]) -> dict[str, Path]:
    # Each distinct source once: kernels alike (RNN steps, layers) have the same source, their
    # functions named after it.
    unique = {s: n for n, s in sources.items()}
    with ThreadPoolExecutor(max_workers=2) as pool:
        paths = list(pool.map(lambda s: compile_fatbin(s).path, unique))
    return dict(zip(unique.values(), paths, strict=True))


@needs_nvcc
def test_every_cuda_kernel_of_the_numerics_cases_compiles_for_sm80_and_sm90() -> None:
    sources: dict[str, str] = {}
    for case in CASES:
        f = tf.function(case.fn, input_signature=case.signature)
        sources.update(
            {f"{case.name}/{k}": s for k, s in tf_stitch.generated_code(f, target="cuda").items()}
        )
    assert len(sources) >= 30
    for name, path in _compile_all(sources).items():
        assert cubin_architectures(path) == {"sm_80", "sm_90"}, name


@needs_nvcc
@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16, tf.float64], ids=lambda d: d.name)
def test_16_and_64_bit_kernels_compile_and_convert_with_the_hardwares_instructions(
    dtype: tf.DType, tmp_path: Path
) -> None:
    """Every kernel of the 16-bit tests (elementwise, reductions, matmul tiles, gathers,
    attention) compiles in float16, bfloat16 and float64 (no attention or tiles there); loads
    and stores of a 16-bit tensor are `cvt` instructions on the GPU (cpu_half.h's portable
    conversions are the host's and the SIMT emulation's)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from test_half_numerics import CASES as HALF_CASES
    from test_half_numerics import PRODUCTS

    sources: dict[str, str] = {}
    for case in HALF_CASES:
        f = tf.function(case.fn, input_signature=[tf.TensorSpec(case.shape, dtype)])
        code = tf_stitch.generated_code(f, target="cuda")
        sources.update({f"{case.name}/{k}": s for k, s in code.items()})
    assert len(sources) == len(HALF_CASES)
    if dtype != tf.float64:
        for name, (make, shapes, _) in PRODUCTS.items():
            index = name == "embedding_norm"
            specs = [tf.TensorSpec(s, tf.int32 if index else dtype) for s in shapes]
            code = tf_stitch.generated_code(
                tf.function(make(dtype), input_signature=specs), target="cuda"
            )
            sources.update({f"{name}/{k}": s for k, s in code.items()})
        assert len(sources) == len(HALF_CASES) + len(PRODUCTS)
    for name, path in _compile_all(sources).items():
        assert cubin_architectures(path) == {"sm_80", "sm_90"}, name
    if dtype == tf.float64:
        assert "double" in sources["gelu/stitched_0"]
        return
    source = tmp_path / "gelu.cu"
    source.write_text(sources["gelu/stitched_0"])
    ptx = tmp_path / "gelu.ptx"
    nvcc = str(find_nvcc())
    subprocess.run([nvcc, "-arch=sm_90", "-ptx", "-o", str(ptx), str(source)], check=True)
    narrow = {tf.float16: "cvt.rn.f16.f32", tf.bfloat16: "cvt.rn.bf16.f32"}[dtype]
    assert narrow in ptx.read_text()


def _workload_sources(small: bool) -> dict[str, str]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tf_stitch.workloads import WORKLOADS

    sources: dict[str, str] = {}
    for name, workload in WORKLOADS.items():
        w = workload.build(small=small)
        f = tf.function(w.fn, input_signature=list(w.input_signature))
        sources.update(
            {f"{name}/{k}": s for k, s in tf_stitch.generated_code(f, target="cuda").items()}
        )
    return sources


@needs_nvcc
def test_the_largest_cuda_kernel_of_each_small_workload_compiles() -> None:
    largest: dict[str, tuple[str, str]] = {}
    for name, source in _workload_sources(small=True).items():
        workload = name.split("/")[0]
        if len(source) > len(largest.get(workload, ("", ""))[1]):
            largest[workload] = (name, source)
    assert len(largest) == 10
    for name, path in _compile_all(dict(largest.values())).items():
        assert cubin_architectures(path) == {"sm_80", "sm_90"}, name


@needs_nvcc
@pytest.mark.slow  # 253 kernels: ~8 minutes on two cores (`pytest -m slow`)
def test_every_cuda_kernel_of_the_workloads_compiles() -> None:
    for name, path in _compile_all(_workload_sources(small=False)).items():
        assert cubin_architectures(path) == {"sm_80", "sm_90"}, name


def test_without_nvcc_cuda_kernels_are_refused_with_one_clear_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cuda_compiler, "find_nvcc", lambda: None)
    with pytest.raises(NvccMissing, match=r"nvcc not found.*CPU kernels are unaffected"):
        compile_fatbin("__global__ void k() {}")


@needs_nvcc
def test_a_kernel_nvcc_rejects_is_a_compile_error_naming_the_command() -> None:
    with pytest.raises(cuda_compiler.KernelCompileError, match="nvcc"):
        compile_fatbin("__global__ void k() { this is not cuda; }")


@needs_nvcc
def test_every_integer_op_in_every_integer_dtype_compiles_as_one_cuda_kernel() -> None:
    """The integer numerics cases (tests/test_int_numerics.py) of all eight integer dtypes,
    cast from two int64 inputs inside one kernel (the elementwise ones; the row and the column
    reductions one kernel each), and the casts of floats to integers: four sources for nvcc
    (each case and dtype its own would take minutes)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from test_int_numerics import CASES as INT_CASES

    def cases(name: str) -> Callable[[tf.Tensor, tf.Tensor], list[tf.Tensor]]:
        """The case `name`, or ("") every elementwise case."""
        chosen = [c for c in INT_CASES if c.name == name or (not name and "reduc" not in c.name)]
        return lambda x, y: every_case(x, y, chosen)

    def every_case(x: tf.Tensor, y: tf.Tensor, chosen: list[Any]) -> list[tf.Tensor]:
        out: list[tf.Tensor] = []
        for case in chosen:
            for dtype in case.dtypes:
                xs = [tf.cast(x, dtype), tf.cast(y, dtype)]
                shift = [tf.cast(tf.bitwise.bitwise_and(y, 15), dtype)] if case.shift else []
                out += case.fn(*xs, *shift)
        return out

    def float_casts(x: tf.Tensor) -> list[tf.Tensor]:
        clip = tf.clip_by_value(x, -100.0, 100.0)
        ints = [tf.int8, tf.int16, tf.int32, tf.int64, tf.uint8, tf.uint16, tf.uint32, tf.uint64]
        return [tf.cast(clip, d) for d in ints] + [tf.cast(x, tf.int32), tf.cast(x, tf.int64)]

    sources: dict[str, str] = {}
    pair = [tf.TensorSpec([None, 3, 40], tf.int64)] * 2
    for name, fn, specs in (
        ("integers", cases(""), pair),  # the elementwise cases
        ("row_reductions", cases("row_reductions"), pair),
        ("column_reductions", cases("column_reductions"), pair),
        ("float_casts", float_casts, [tf.TensorSpec([None, 40], tf.float16)]),
    ):
        code = tf_stitch.generated_code(tf.function(fn, input_signature=specs), target="cuda")
        assert 1 <= len(code) <= 2, sorted(code)  # (the reductions of 8 dtypes: 2 kernels)
        sources.update({f"{name}/{k}": s for k, s in code.items()})
    assert "ts_floor_div" in sources["integers/stitched_0"]
    for name, path in _compile_all(sources).items():
        assert cubin_architectures(path) == {"sm_80", "sm_90"}, name
