"""Every numerics case (tests/test_numerics.py) in float16, bfloat16 and float64: the case's
frozen graph with its float32 tensors retyped (tests/retype.py), optimized as a GraphDef and run
against TensorFlow's own run of the retyped graph.

float64 is computed in double: within 1e-9 of TensorFlow's. The 16-bit floats are computed in
float32 and rounded once, where TensorFlow rounds after every op: within 1e-2 (float16) and
6e-2 (bfloat16), relative and absolute. Each case stitches as many kernels as in float32, except
where a dtype's difference is named below (`FEWER`).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from retype import retype
from test_numerics import CASES, Case, _inputs

import tf_stitch

DTYPES = [tf.float16, tf.bfloat16, tf.float64]
TOLERANCE = {tf.float16: 1e-2, tf.bfloat16: 6e-2, tf.float64: 1e-9}
# Cases whose 16-bit or float64 version stitches fewer kernels than its float32 one, and why.
FEWER: dict[str, str] = {}
# Floor, ceil and round of values TensorFlow rounds to 16 bits after every op jump by 1 where
# a value crosses an integer: these are compared with TensorFlow's float32 run rounded once.
DISCONTINUOUS = {"rounding"}


def _run_or_skip(run: object, *args: object) -> list[np.ndarray]:
    """TensorFlow's run of the retyped case, or a skip where TensorFlow has no such op in the
    dtype (FusedBatchNorm of float64) or no CPU kernel for it."""
    try:
        return run(*args)  # type: ignore[operator]
    except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError, ValueError) as e:
        text = str(e)
        if "No OpKernel" in text or "not in the list of allowed values" in text:
            pytest.skip(f"TensorFlow cannot run this case in this dtype: {text.splitlines()[0]}")
        raise


@pytest.mark.parametrize("kernels", ["cpu", "simt"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_case_in_every_float_dtype(
    case: Case, dtype: tf.DType, kernels: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the CPU kernels and as the CUDA kernels through the SIMT emulation (those the CUDA
    emitter does not emit stay TensorFlow's there, as in tests/codegen/test_simt.py)."""
    monkeypatch.setenv("TF_STITCH_KERNELS", kernels)
    retyped = retype(case.fn, case.signature, dtype)
    xs = [tf.cast(x, d) for x, d in zip(_inputs(case, 1, 1), retyped.dtypes, strict=True)]
    _run_or_skip(retyped.run, retyped.graph_def, xs)  # skips where TensorFlow cannot run it
    outputs = [name.removesuffix(":0") for name in retyped.outputs]
    optimized = tf_stitch.optimize(retyped.graph_def, outputs=retyped.outputs)
    kernels = sum(n.op == "StitchedKernel" for n in optimized.node)
    expected = case.kernels - int(case.name in FEWER)
    assert kernels == expected, (kernels, outputs)
    for batch, seed in ((3, 0), (1, 1), (6, 2)):
        xs32 = _inputs(case, batch, seed)
        xs = [tf.cast(x, d) for x, d in zip(xs32, retyped.dtypes, strict=True)]
        want = retyped.run(retyped.graph_def, xs)
        got = retyped.run(optimized, xs)
        tol = TOLERANCE[dtype]
        if case.name in DISCONTINUOUS and dtype != tf.float64:
            # kernels round once, at the output: TensorFlow's float32 run of the same inputs
            f32 = retype(case.fn, case.signature, tf.float32)
            wide = [tf.cast(x, tf.float32) if x.dtype == dtype else x for x in xs]
            want = [tf.cast(w, dtype).numpy() for w in f32.run(f32.graph_def, wide)]
        for w, g in zip(want, got, strict=True):
            assert w.dtype == g.dtype and w.shape == g.shape
            w64, g64 = w.astype(np.float64), g.astype(np.float64)
            np.testing.assert_allclose(g64, w64, rtol=tol, atol=tol, equal_nan=True)
