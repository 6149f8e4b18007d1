"""The JAX side of counting XLA:GPU kernels without a GPU (run by xla_gpu.py as a subprocess,
so that JAX and TensorFlow never share a process).

    python -m tf_stitch.launches.xla_gpu_compile MODULE.hlo.pb TARGET.txtpb [OPTIMIZED.hlo.pb]

Compiles the serialized HLO module for the GPU the target description names (XLA's GPU
target-config text format) with XLA's own GPU compiler, deviceless, and prints the optimized
module's text (and writes its serialized HloModuleProto to OPTIMIZED.hlo.pb, where given).
XLA_FLAGS (e.g. --xla_gpu_enable_triton_gemm=false) apply as usual. Needs the
`xla-gpu` extra (jax, jaxlib and the CUDA plugin; see the README) and JAX_PLATFORMS=cpu.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def optimize_for_gpu(hlo_proto: bytes, target_config: str) -> tuple[str, bytes]:
    """The optimized module's text and its serialized HloModuleProto."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from jax._src import compiler
    from jax._src.interpreters import mlir
    from jax._src.lib import _jax
    from jax._src.lib.mlir import ir
    from jax.experimental import topologies

    topology = topologies.get_topology_desc(
        platform="cuda", topology="1x1x1", target_config=target_config
    )
    device: Any = topology.devices[0]  # jaxlib's Device (its stubs lack client, device_kind)
    with mlir.make_ir_context():
        module = ir.Module.parse(_jax.mlir.hlo_to_stablehlo(hlo_proto))
        options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
        executable = device.client.compile(
            module, executable_devices=_jax.DeviceList((device,)), compile_options=options
        )
    optimized = executable.hlo_modules()[0]
    text = f"// device: {device.device_kind}\n" + optimized.to_string()
    return text, optimized.as_serialized_hlo_module_proto()


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0], "rb") as f:
        proto = f.read()
    with open(argv[1], encoding="utf-8") as f:
        target = f.read()
    text, optimized = optimize_for_gpu(proto, target)
    if len(argv) == 3:
        with open(argv[2], "wb") as f:
            f.write(optimized)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
