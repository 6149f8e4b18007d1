"""The machine's peaks, measured where the model runs, for the roofline analysis: FLOP/s from
a large matmul; bytes/s from a large copy into a buffer allocated once (NumPy, reads and writes)
and a large TensorFlow reduction (reads), the larger of the two being the roof.

A TensorFlow elementwise op on a large tensor is no measure of the memory's bandwidth on Linux:
it allocates its output afresh and pays a page fault per 4 KiB page (1.2 GB/s measured on the
development VM, against 10 GB/s for the copy and 16 GB/s for the reduction).

Each is timed `rounds` times after a warm-up; the peak is the best round (a peak is what the
machine can reach, not what it usually does), the median is kept beside it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf


def _times(fn: Callable[[], Any], rounds: int) -> list[float]:
    fn()
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        result = fn()
        if hasattr(result, "numpy"):
            result.numpy()
        out.append(time.perf_counter() - start)
    return out


def measure_peaks(matmul_n: int = 2048, copy_mib: int = 256, rounds: int = 7) -> dict[str, Any]:
    """{"flops_per_s", "bytes_per_s", their medians, and what was run}, measured now."""
    if matmul_n < 1 or copy_mib < 1 or rounds < 1:
        raise ValueError("matmul_n, copy_mib and rounds must be positive")
    a = tf.random.stateless_normal([matmul_n, matmul_n], seed=[1, 2])
    b = tf.random.stateless_normal([matmul_n, matmul_n], seed=[3, 4])
    matmul = tf.function(lambda: tf.matmul(a, b))
    n = copy_mib * 2**20 // 4
    x = tf.random.stateless_normal([n], seed=[5, 6])
    source = x.numpy()
    target = np.empty_like(source)
    reduce = tf.function(lambda: tf.reduce_sum(x))
    mm = _times(matmul, rounds)
    cp = _times(lambda: np.copyto(target, source), rounds)
    rd = _times(reduce, rounds)
    flops = 2.0 * matmul_n**3
    copy_bytes, read_bytes = 2.0 * n * 4, 1.0 * n * 4
    copy, read = copy_bytes / min(cp), read_bytes / min(rd)
    return {
        "flops_per_s": flops / min(mm),
        "flops_per_s_median": flops / statistics.median(mm),
        "bytes_per_s": max(copy, read),
        "bytes_per_s_median": max(
            copy_bytes / statistics.median(cp), read_bytes / statistics.median(rd)
        ),
        "copy_bytes_per_s": copy,
        "read_bytes_per_s": read,
        "matmul": f"float32 matmul [{matmul_n},{matmul_n}] x [{matmul_n},{matmul_n}]",
        "copy": f"copy of {copy_mib} MiB into a buffer allocated once (2 x {copy_mib} MiB moved)",
        "read": f"float32 reduce_sum of {copy_mib} MiB",
        "rounds": rounds,
    }
