"""What this host's TensorFlow CPU kernels are: oneDNN's or Eigen's, on which instruction set.

Some plans depend on it. TensorFlow turns oneDNN on by itself only on some x86 CPUs (those with
AVX-512 and newer extensions) unless `TF_ENABLE_ONEDNN_OPTS` says otherwise, and decides once,
when it is imported. With oneDNN on, CPU kernels take NCHW convolutions and pools (the graph
planned for a GPU runs on the host); with it off, Eigen's take NHWC only. oneDNN's convolution
with a batch norm as post-op (the `_FusedConv2D` TensorFlow's remapper makes of a Conv2D and a
FusedBatchNormV3) ran 10x slower than the two apart on an AMD EPYC with AVX2 and no AVX-512
(27.5 ms against 2.7 for a 3x3 convolution of 56x56x64, TensorFlow 2.21).
"""

from __future__ import annotations

import functools
from pathlib import Path


@functools.cache
def onednn_enabled() -> bool:
    """Whether this process's TensorFlow runs its CPU kernels through oneDNN."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


@functools.cache
def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The first CPU's feature flags (empty where there is no /proc/cpuinfo)."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def fused_batch_norm_pays() -> bool:
    """Whether a convolution's batch norm is best handed to TensorFlow's remapper as a
    FusedBatchNormV3 it fuses into the call: with Eigen's kernels (measured: ResNet-50 0.93x
    TensorFlow's latency, 1.03x without it) and with oneDNN's where AVX-512 runs them (0.93x,
    an Intel Xeon), not with oneDNN's on a CPU without AVX-512 (14x slower)."""
    return not onednn_enabled() or "avx512f" in cpu_flags()
