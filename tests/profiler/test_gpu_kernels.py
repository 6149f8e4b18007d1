"""GPU kernels joined to their ops, on a hand-built XSpace shaped like the TF profiler's GPU
traces (no GPU here): by correlation id with the host launch, by kernel annotation, by tf_op;
ops and layers stretched to cover their kernels; every child inside its parent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tensorflow.tsl.profiler.protobuf import xplane_pb2

from tf_stitch.profiler.trace import gpu_kernels
from tf_stitch.profiler.trace.spans import step_spans
from tf_stitch.profiler.trace.xplane import host_events, step_intervals

US = 1_000_000  # ps


class _Plane:
    def __init__(self, space: Any, name: str) -> None:
        self.plane = space.planes.add(id=len(space.planes), name=name)
        self.events: dict[str, int] = {}
        self.stats: dict[str, int] = {}

    def _id(self, table: dict[str, int], meta: Any, name: str) -> int:
        if name not in table:
            table[name] = len(table) + 1
            meta[table[name]].id = table[name]
            meta[table[name]].name = name
            if table is self.events and ":" in name:  # TF op events: `node:OpType`, `OpType`
                meta[table[name]].display_name = name.rsplit(":", 1)[1]
        return table[name]

    def event(self, line: str, name: str, start_us: float, end_us: float, **stats: Any) -> None:
        lines = {ln.name: ln for ln in self.plane.lines}
        ln = lines.get(line) or self.plane.lines.add(id=len(lines) + 1, name=line)
        ev = ln.events.add(metadata_id=self._id(self.events, self.plane.event_metadata, name))
        ev.offset_ps, ev.duration_ps = int(start_us * US), int((end_us - start_us) * US)
        for key, value in stats.items():
            sid = self._id(self.stats, self.plane.stat_metadata, key)
            kind = "str_value" if isinstance(value, str) else "int64_value"
            ev.stats.add(metadata_id=sid, **{kind: value})


def _trace(tmp_path: Path) -> Path:
    space = xplane_pb2.XSpace()
    host = _Plane(space, "/host:CPU")
    host.event("python", "tf_stitch_step", 0, 1000, step_num=0, _r=1)
    host.event("tf_Compute/1", "m_1/dense_1/MatMul:MatMul", 100, 200)
    host.event("tf_Compute/1", "m_1/relu_1/Relu:Relu", 210, 260)
    host.event("tf_Compute/1", "m_1/out_1/Add:AddV2", 300, 320)
    cupti = _Plane(space, "/host:CUPTI")
    cupti.event("tf_Compute/1", "cudaLaunchKernel", 150, 152, correlation_id=11)
    gpu = _Plane(space, "/device:GPU:0")
    gpu.event("Stream #7", "gemm_kernel", 220, 400, correlation_id=11)
    gpu.event("Stream #7", "relu_kernel", 405, 420, kernel_annotation="m_1/relu_1/Relu:Relu")
    gpu.event("Stream #7", "add_kernel", 425, 430, tf_op="m_1/out_1/Add:AddV2")
    gpu.event("Stream #7", "memcpy_kernel", 431, 432, correlation_id=99)  # no known launch
    path = tmp_path / "plugins" / "profile" / "run" / "host.xplane.pb"
    path.parent.mkdir(parents=True)
    path.write_bytes(space.SerializeToString())
    return tmp_path


def test_kernels_are_joined_by_correlation_annotation_and_tf_op(tmp_path: Path) -> None:
    logdir = _trace(tmp_path)
    device, other = gpu_kernels.trace_events(logdir)
    assert [k.name for k in device] == ["gemm_kernel", "relu_kernel", "add_kernel", "memcpy_kernel"]
    linked = gpu_kernels.link_kernels(device, other)
    assert [(k.name, node) for k, node in linked] == [
        ("gemm_kernel", "m_1/dense_1/MatMul"),
        ("relu_kernel", "m_1/relu_1/Relu"),
        ("add_kernel", "m_1/out_1/Add"),
    ]


def test_ops_and_layers_cover_their_kernels(tmp_path: Path) -> None:
    logdir = _trace(tmp_path)
    events = host_events(logdir)
    (step,) = step_intervals(events, "tf_stitch_step")
    device, other = gpu_kernels.trace_events(logdir)
    spans = step_spans(events, step, device_kernels=gpu_kernels.link_kernels(device, other))
    kernels = [s for s in spans if s.level == "kernel"]
    assert [(k.name, spans[k.parent].name, k.type) for k in kernels] == [
        ("gemm_kernel", "m_1/dense_1/MatMul", "GPU kernel"),
        ("relu_kernel", "m_1/relu_1/Relu", "GPU kernel"),
        ("add_kernel", "m_1/out_1/Add", "GPU kernel"),
    ]
    matmul = spans[kernels[0].parent]
    assert (matmul.start_ns, matmul.end_ns) == (100_000.0, 400_000.0)  # stretched to the kernel
    assert spans[matmul.parent].name == "dense_1" and spans[matmul.parent].end_ns == 400_000.0
    for s in spans[1:]:
        p = spans[s.parent]
        assert p.start_ns <= s.start_ns and s.end_ns <= p.end_ns, (s, p)
