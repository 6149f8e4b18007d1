"""fusion/host_cpu.py: what this host's TensorFlow CPU kernels are, and the one plan that
depends on it (a convolution's batch norm fused by TensorFlow, or stitched after it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tf_stitch.fusion import host_cpu


def test_cpu_flags_are_read_from_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: X\nflags\t\t: fpu sse avx2 fma\n\n")
    assert host_cpu.cpu_flags(str(info)) == {"fpu", "sse", "avx2", "fma"}
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd sve\n")
    assert "sve" in host_cpu.cpu_flags(str(arm))
    assert host_cpu.cpu_flags(str(tmp_path / "none")) == frozenset()


@pytest.mark.parametrize(
    ("onednn", "flags", "pays"),
    [
        (False, {"avx2"}, True),  # Eigen's fused convolution
        (True, {"avx2", "avx512f"}, True),  # oneDNN with AVX-512 (an Intel Xeon)
        (True, {"avx2"}, False),  # oneDNN without AVX-512 (an AMD EPYC): 10x slower
    ],
)
def test_a_fused_batch_norm_pays_except_through_onednn_without_avx512(
    monkeypatch: pytest.MonkeyPatch, onednn: bool, flags: set[str], pays: bool
) -> None:
    monkeypatch.setattr(host_cpu, "onednn_enabled", lambda: onednn)
    monkeypatch.setattr(host_cpu, "cpu_flags", lambda: frozenset(flags))
    assert host_cpu.fused_batch_norm_pays() is pays


def test_onednn_enabled_is_tensorflows_own_answer() -> None:
    from tensorflow.python.util import _pywrap_util_port

    assert host_cpu.onednn_enabled() is bool(_pywrap_util_port.IsMklEnabled())
