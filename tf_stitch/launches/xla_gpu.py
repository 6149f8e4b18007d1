"""Kernels XLA:GPU launches for a function, counted on a machine without a GPU.

TensorFlow gives the function's unoptimized HLO module (`hlo_serialized`); a subprocess
(`xla_gpu_compile.py`, JAX's XLA with the CUDA plugin, deviceless) compiles it for a target GPU
described by one of `xla_gpu_targets/` (H100 SXM, H200) and gives the optimized module, text
and HloModuleProto; its ENTRY kernels are counted from the proto (`hlo_proto.py`,
`hlo_kernels.count_module_kernels`: loop bodies times their trip count). No
autotuning happens without a GPU, so the GEMM backend is pinned: `triton_gemm` on or off.

Needs the `xla-gpu` extra: `pip install --no-deps jax==0.10.2 jaxlib==0.10.2
jax-cuda12-plugin==0.10.2 jax-cuda12-pjrt==0.10.2` (and scipy); `unavailable()` says why not.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tf_stitch.launches.hlo_copies import without_copies
from tf_stitch.launches.hlo_kernels import HloKernels, compiler_ir, count_module_kernels
from tf_stitch.launches.hlo_proto import module_from_proto

TARGETS = {
    "h100": Path(__file__).with_name("xla_gpu_targets") / "h100_sxm.txtpb",
    "h200": Path(__file__).with_name("xla_gpu_targets") / "h200.txtpb",
}
_PACKAGES = ("jax", "jaxlib", "jax_plugins.xla_cuda12")
COMPILE_TIMEOUT_S = 600


def unavailable() -> str | None:
    """Why XLA:GPU counts cannot be made here, or None if they can."""
    for name in _PACKAGES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            return (
                f"the xla-gpu extra is not installed ({name} is missing): pip install --no-deps "
                "jax==0.10.2 jaxlib==0.10.2 jax-cuda12-plugin==0.10.2 jax-cuda12-pjrt==0.10.2"
            )
    return None


def optimized_gpu_hlo(hlo_proto: bytes, target: str = "h100", triton_gemm: bool = True) -> str:
    """The optimized HLO text XLA:GPU makes of a serialized HLO module for `target`."""
    return optimized_gpu_module(hlo_proto, target, triton_gemm)[0]


def optimized_gpu_module(
    hlo_proto: bytes, target: str = "h100", triton_gemm: bool = True
) -> tuple[str, bytes]:
    """The optimized module XLA:GPU makes of a serialized HLO module for `target`: its text and
    its serialized HloModuleProto."""
    if target not in TARGETS:
        raise ValueError(f"target must be one of {sorted(TARGETS)}, got {target!r}")
    reason = unavailable()
    if reason is not None:
        raise RuntimeError(reason)
    env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2")
    flag = f"--xla_gpu_enable_triton_gemm={'true' if triton_gemm else 'false'}"
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flag}".strip()
    with tempfile.TemporaryDirectory(prefix="tf_stitch_xla_gpu_") as tmp:
        module, optimized = Path(tmp) / "module.hlo.pb", Path(tmp) / "optimized.hlo.pb"
        module.write_bytes(hlo_proto)
        command = [sys.executable, "-m", "tf_stitch.launches.xla_gpu_compile"]
        result = subprocess.run(
            [*command, str(module), str(TARGETS[target]), str(optimized)],
            capture_output=True,
            text=True,
            env=env,
            timeout=COMPILE_TIMEOUT_S,
        )
        if result.returncode != 0:
            tail = "\n".join(result.stderr.strip().splitlines()[-15:])
            raise RuntimeError(f"XLA:GPU could not compile the module for {target}:\n{tail}")
        return result.stdout, optimized.read_bytes()


def count_xla_gpu_launches(
    fn: Callable[..., Any], inputs: Any, target: str = "h100", triton_gemm: bool = True
) -> HloKernels:
    """Count the kernels XLA:GPU (compiled for `target`, no GPU needed) runs for `fn(*inputs)`."""
    proto = without_copies(compiler_ir(fn, inputs, "hlo_serialized"))
    _, optimized = optimized_gpu_module(proto, target, triton_gemm)
    return count_module_kernels(module_from_proto(optimized))
