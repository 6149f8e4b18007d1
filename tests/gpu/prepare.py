"""Prepares the GPU check (tests/gpu/run_on_gpu.sh) on a machine with TensorFlow and nvcc.

    python tests/gpu/prepare.py OUT_DIR

For each case below, the graph (batch size unknown) is optimized as usual (fused) and also
planned with every op alone (unfused: one kernel per op, intermediates in global memory, as a GPU
runs a graph that nobody fused). Every kernel of both plans that the CUDA emitter handles is
compiled by nvcc. Its inputs and expected outputs at a small batch are computed by TensorFlow
(on the CPU) from random inputs; the GPU times the same kernels at the case's large batch.
OUT_DIR gets `manifest.json`, the fatbins and the small arrays as raw little-endian files (a few
MB), so that the GPU machine needs only Python's standard library and the CUDA driver
(check_gpu.py).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf

from tf_stitch.codegen.cuda import CudaUnsupported, emit_cuda, flat_elements, gathers
from tf_stitch.codegen.kernel_ir import Kernel
from tf_stitch.codegen.lower import lower
from tf_stitch.fusion.planner import PlannerOptions, plan_groups
from tf_stitch.graph import frontends
from tf_stitch.graph.io import graph_to_graph_def
from tf_stitch.graph.ir import Graph
from tf_stitch.passes.base import Options, PassContext
from tf_stitch.passes.pipeline import PIPELINE
from tf_stitch.runtime.cuda_compiler import compile_fatbin

S = tf.TensorSpec


def _layer_norm_gelu(x: tf.Tensor) -> tf.Tensor:
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.square(x - m), -1, keepdims=True)
    return tf.nn.gelu((x - m) * tf.math.rsqrt(v + 1e-5) * 1.5 + 0.25, approximate=False)


def _batch_norm_training(x: tf.Tensor) -> tf.Tensor:
    mean = tf.reduce_mean(x, [0, 1, 2], keepdims=True)
    var = tf.reduce_mean(tf.square(x - mean), [0, 1, 2], keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + 1e-3)


def _rms_norm(x: tf.Tensor) -> tf.Tensor:
    return x * tf.math.rsqrt(tf.reduce_mean(tf.square(x), -1, keepdims=True) + 1e-6)


def _bias_tanh(x: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    return tf.tanh(x + b) * 2.0 - tf.sigmoid(x)


def _scaled_masked_softmax(x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    return tf.nn.softmax(tf.where(mask > 0.0, x * 0.125, -1e9))


def _attention_pooling(a: tf.Tensor, h: tf.Tensor) -> tf.Tensor:
    return tf.tanh(tf.reduce_sum(tf.sigmoid(a) * h, 1))


_W = tf.constant(np.random.default_rng(1).standard_normal([256, 512]).astype(np.float32) * 0.05)


def _dense_gelu(x: tf.Tensor) -> tf.Tensor:
    """A small matmul (a tile computed per row) and its epilogue in one kernel."""
    return tf.nn.gelu(tf.matmul(x, _W) + 0.1)


_TABLE = tf.constant(np.random.default_rng(2).standard_normal([1000, 128]).astype(np.float32))


def _embedding_norm(ids: tf.Tensor) -> tf.Tensor:
    """Rows of an embedding table picked by index, then normalized: a gather in the kernel."""
    e = tf.gather(_TABLE, ids)
    return e * tf.math.rsqrt(tf.reduce_sum(tf.square(e), -1, keepdims=True) + 1e-6)


def _transposed_softmax(x: tf.Tensor) -> tf.Tensor:
    return tf.nn.softmax(tf.transpose(x, [0, 2, 1]) * 2.0)


_WO = tf.constant(np.random.default_rng(3).standard_normal([768, 768]).astype(np.float32) * 0.03)
_BO = tf.constant(np.random.default_rng(4).standard_normal([768]).astype(np.float32))


def _bias_residual_layer_norm(x: tf.Tensor, residual: tf.Tensor) -> tf.Tensor:
    """BERT's output sublayer: a library matmul whose epilogue (its bias add) is stitched with
    the residual add and the layer norm after it; the matmul stays the library's."""
    y = tf.matmul(x, _WO) + _BO + residual
    m = tf.reduce_mean(y, -1, keepdims=True)
    v = tf.reduce_mean(tf.square(y - m), -1, keepdims=True)
    return (y - m) * tf.math.rsqrt(v + 1e-12)


def _attention(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
    """T5's attention: heads split by transposes, a position bias, softmax, the context's heads
    merged: one kernel."""
    q, k, v = (tf.transpose(t, [0, 2, 1, 3]) for t in (q, k, v))
    p = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) + bias)
    return tf.transpose(tf.matmul(p, v), [0, 2, 1, 3])


_WC = tf.constant(np.random.default_rng(5).standard_normal([3, 3, 32, 64]).astype(np.float32) * 0.1)
_BC = tf.constant(np.random.default_rng(6).standard_normal([64]).astype(np.float32))
_WP = tf.constant(np.random.default_rng(7).standard_normal([1, 1, 64, 32]).astype(np.float32) * 0.1)


def _conv_swish_pool_nchw(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """An EfficientNet block between two convolutions, laid out for a GPU (NCHW): the first
    one's bias, swish and the squeeze's global mean in one kernel that reads and writes NCHW."""
    y = tf.nn.silu(tf.nn.conv2d(x, _WC, 1, "SAME") + _BC)
    return tf.nn.conv2d(y, _WP, 1, "SAME"), tf.reduce_mean(y, [1, 2])


# name -> (function, input shapes with None for the batch, the batch timed on the GPU).
CASES: dict[str, tuple[Callable[..., Any], list[list[int | None]], int]] = {
    "layer_norm_gelu": (_layer_norm_gelu, [[None, 768]], 4096),
    "rms_norm": (_rms_norm, [[None, 1024]], 4096),
    "softmax": (tf.nn.softmax, [[None, 512]], 8192),
    "scaled_masked_softmax": (_scaled_masked_softmax, [[None, 1024], [None, 1024]], 2048),
    "bias_tanh": (_bias_tanh, [[None, 1024], [1024]], 8192),
    "batch_norm_training": (_batch_norm_training, [[None, 28, 28, 64]], 32),
    "attention_pooling": (_attention_pooling, [[None, 50, 1], [None, 50, 64]], 256),
    "transposed_softmax": (_transposed_softmax, [[None, 128, 96]], 64),
    "dense_gelu": (_dense_gelu, [[None, 256]], 4096),
    "embedding_norm": (_embedding_norm, [[None]], 65536),
    "bias_residual_layer_norm": (_bias_residual_layer_norm, [[None, 768], [None, 768]], 4096),
    "attention": (_attention, [[None, 96, 4, 64]] * 3 + [[1, 4, 96, 96]], 48),
    "conv_swish_pool_nchw": (_conv_swish_pool_nchw, [[None, 28, 28, 32]], 64),
}
# 16-bit cases: stored in 16 bits, computed in float32 (TensorFlow's outputs round after each op)
CASES["layer_norm_gelu_f16"] = (_layer_norm_gelu, [[None, 768]], 4096)
CASES["scaled_masked_softmax_bf16"] = (_scaled_masked_softmax, [[None, 1024], [None, 1024]], 2048)
CASES["rms_norm_f64"] = (_rms_norm, [[None, 1024]], 4096)  # computed in double
_DTYPES = {
    "layer_norm_gelu_f16": tf.float16,
    "scaled_masked_softmax_bf16": tf.bfloat16,
    "rms_norm_f64": tf.float64,
}
NCHW_CASES = frozenset({"conv_swish_pool_nchw"})  # optimized for a GPU's layout
_INT_INPUTS = {"embedding_norm": 1000}  # integer inputs: indices below this
CHECK_BATCH = 3  # the batch whose outputs are checked against TensorFlow


def _prepared_graph(
    fn: Callable[..., Any], shapes: list[list[int | None]], dtype: tf.DType, layout: str
) -> Graph:
    """The graph as the optimizer plans it (every pass before stitch)."""
    cf = tf.function(fn).get_concrete_function(*[S(s, dtype) for s in shapes])
    graph = frontends.load(cf).graph
    ctx = PassContext(Options(compile=False, conv_layout=layout))
    for p in PIPELINE:
        if p.name == "stitch":
            return graph
        graph = p.run(graph, ctx)
    raise AssertionError("no stitch pass")


def _kernels(graph: Graph, merge: bool) -> list[Kernel]:
    plan = plan_groups(graph, PlannerOptions(min_compute_ops=1 if not merge else 2, merge=merge))
    out = []
    for g in plan.groups:
        kernel = lower(graph, g, f"k{g.id}")
        try:
            emit_cuda(kernel)
        except CudaUnsupported:
            continue
        out.append(kernel)
    return out


def _evaluate(graph: Graph, tensors: list[str], feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    with tf.Graph().as_default() as g:
        tf.graph_util.import_graph_def(graph_to_graph_def(graph), name="")
        with tf.compat.v1.Session(graph=g) as sess:
            return sess.run(tensors, feeds)


def _save(out: Path, name: str, value: np.ndarray) -> dict[str, Any]:
    path = out / f"{name}.bin"
    dtype = str(value.dtype)
    if dtype in ("float16", "bfloat16"):  # 16 bits a value, little-endian
        value = np.ascontiguousarray(value).view(np.uint16)
    np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tofile(path)
    return {"file": path.name, "dtype": dtype, "shape": list(value.shape)}


def _describe(kernel: Kernel, values: dict[str, np.ndarray], out: Path, tag: str) -> dict[str, Any]:
    """A kernel for check_gpu.py: every size is a number or "batch"."""
    fatbin = compile_fatbin(emit_cuda(kernel))
    shutil.copyfile(fatbin.path, out / f"{tag}.fatbin")

    def sizes(dims: tuple[int | str | None, ...]) -> list[int | str]:
        return [d if isinstance(d, int) else "batch" for d in dims]

    def tensors(params: list[Any], kind: str) -> list[dict[str, Any]]:
        return [
            {**_save(out, f"{tag}_{kind}{i}", values[str(p.tensor)]), "dims": sizes(p.dims)}
            for i, p in enumerate(params)
        ]

    return {
        "name": kernel.name,
        "fatbin": f"{tag}.fatbin",
        "launch": "elements" if flat_elements(kernel) else "blocks",
        "inputs": tensors(kernel.inputs, "in"),
        "outputs": tensors(kernel.outputs, "out"),
        "symbols": len(kernel.symbols),  # each is the batch
        "gathers": gathers(kernel),  # then an int64[3] error cell follows the outputs
        "units": sizes(kernel.outer),
        "row": sizes(kernel.inner),
    }


def prepare(out: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    manifest: dict[str, Any] = {"cases": []}
    for name, (fn, shapes, batch) in CASES.items():
        dtype = tf.int32 if name in _INT_INPUTS else _DTYPES.get(name, tf.float32)
        graph = _prepared_graph(fn, shapes, dtype, "NCHW" if name in NCHW_CASES else "NHWC")
        feeds = {}
        for r, shape in zip(graph.inputs, shapes, strict=True):
            dims = [CHECK_BATCH if d is None else d for d in shape]
            if graph.info(r).dtype == "int32":
                feeds[str(r)] = rng.integers(0, _INT_INPUTS[name], dims).astype(np.int32)
            else:
                x = rng.standard_normal(dims).astype(np.float32)
                feeds[str(r)] = x.astype(dtype.as_numpy_dtype)
        fused, unfused = _kernels(graph, True), _kernels(graph, False)
        tensors = sorted({str(p.tensor) for k in fused + unfused for p in k.inputs + k.outputs})
        values = dict(zip(tensors, _evaluate(graph, tensors, feeds), strict=True))
        manifest["cases"].append(
            {
                "name": name,
                "check_batch": CHECK_BATCH,
                "batch": batch,
                "fused": [_describe(k, values, out, f"{name}_f{i}") for i, k in enumerate(fused)],
                "unfused": [
                    _describe(k, values, out, f"{name}_u{i}") for i, k in enumerate(unfused)
                ],
            }
        )
        print(f"{name}: {len(fused)} fused kernel(s), {len(unfused)} unfused", flush=True)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    prepare(Path(sys.argv[1]))
