"""CUDA kernels compiled by nvcc into fatbins, in the same content-addressed cache as the CPU
kernels (`cache_dir()/cuda/<key[:2]>/<key>.fatbin`, with the `.cu` beside it).

nvcc is `$TF_STITCH_NVCC`, else `$CUDA_HOME/bin/nvcc`, else `nvcc` on PATH. A fatbin holds
machine code for sm_80 (A100) and sm_90 (H100/H200) and PTX for compute_90, which newer GPUs
compile when they load it. Without nvcc, `find_nvcc()` is None and `compile_fatbin` raises
NvccMissing with one message saying how to provide it; CPU kernels are unaffected.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from tf_stitch.codegen.compilers import KernelCompileError, NvccMissing
from tf_stitch.runtime import cache, leftovers
from tf_stitch.runtime.kernel_compiler import run_compiler

__all__ = [
    "CompiledFatbin",
    "KernelCompileError",
    "NvccMissing",
    "compile_fatbin",
    "fatbin_key",
    "find_nvcc",
    "nvcc_identity",
]

ARCHITECTURES = ("sm_80", "sm_90")
PTX = "compute_90"
NVCC_FLAGS = (
    "-fatbin",
    "-O3",
    "-std=c++17",
    "--fmad=false",  # each op rounds, as on the CPU (kernel_compiler.py); tiles call fmaf
    "-diag-suppress",
    "177",  # math helpers a kernel does not call
    *(f for sm in ARCHITECTURES for f in ("-gencode", f"arch=compute_{sm[3:]},code={sm}")),
    "-gencode",
    f"arch={PTX},code={PTX}",
)


@dataclass(frozen=True)
class CompiledFatbin:
    key: str
    path: Path


def find_nvcc() -> str | None:
    explicit = os.environ.get("TF_STITCH_NVCC")
    if explicit:
        return explicit
    home = os.environ.get("CUDA_HOME")
    if home and (Path(home) / "bin" / "nvcc").exists():
        return str(Path(home) / "bin" / "nvcc")
    return shutil.which("nvcc")


@functools.cache
def nvcc_identity(nvcc: str) -> str:
    return run_compiler([nvcc, "--version"])


def fatbin_key(source: str, nvcc: str) -> str:
    material = {"source": source, "nvcc": nvcc_identity(nvcc), "flags": list(NVCC_FLAGS)}
    blob = json.dumps(material, sort_keys=True, ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()


def compile_fatbin(source: str) -> CompiledFatbin:
    """The fatbin of a CUDA kernel source, compiled once per source and nvcc (thread- and
    process-safe, like compile_kernel). Raises NvccMissing or KernelCompileError."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise NvccMissing(
            "nvcc not found: CUDA kernels are not built (set CUDA_HOME or TF_STITCH_NVCC, or "
            "put the CUDA toolkit's bin directory on PATH); CPU kernels are unaffected"
        )
    key = fatbin_key(source, nvcc)
    path = cache.cache_dir() / "cuda" / key[:2] / f"{key}.fatbin"

    def build(tmp: Path) -> None:
        with leftovers.scratch_dir() as scratch:  # nvcc never writes into the cache
            cu, fatbin = scratch / "kernel.cu", scratch / "kernel.fatbin"
            cu.write_text(source, encoding="utf-8")
            run_compiler([nvcc, *NVCC_FLAGS, "-o", str(fatbin), str(cu)])
            cache.copy_in(cu, path.with_suffix(".cu"))
            shutil.copyfile(fatbin, tmp)

    cache.build_once(path, build, ".fatbin")
    return CompiledFatbin(key, path)
