"""The GPU kernel of StitchedKernel: registered (under the "cuda" label, next to a CPU kernel
with the same label), and selected by the nodes optimize(cuda=True) gives a CUDA build. On this
machine there is no GPU, so those nodes run the CPU kernel; the GPU launch itself is exercised
by tests/gpu/run_on_gpu.sh on a machine with one."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close
from tensorflow.python.framework import kernels

import tf_stitch
from tf_stitch.codegen.cuda import BLOCK_THREADS
from tf_stitch.runtime import cache, cuda_compiler, op_library
from tf_stitch.runtime.cuda_compiler import find_nvcc

S = tf.TensorSpec


TABLE = tf.constant(np.random.default_rng(0).standard_normal([50, 16]).astype(np.float32))


def _layer_norm_and_lookup(x: tf.Tensor, ids: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.square(x - m), -1, keepdims=True)
    return tf.nn.gelu((x - m) * tf.math.rsqrt(v + 1e-5)), tf.tanh(tf.gather(TABLE, ids)) * 2.0


SIGNATURE = [S([None, 64]), S([None], tf.int32)]


def _inputs(batch: int) -> tuple[tf.Tensor, tf.Tensor]:
    ids = np.random.default_rng(batch).integers(0, 50, [batch]).astype(np.int32)
    return tf.random.normal([batch, 64]), tf.constant(ids)


def test_a_gpu_kernel_is_registered_under_the_cuda_label() -> None:
    op_library.load()
    registered = {
        (k.device_type, k.label)
        for k in kernels.get_registered_kernels_for_op("StitchedKernel").kernel
    }
    assert registered == {("CPU", ""), ("CPU", "cuda"), ("GPU", "cuda")}


def test_the_launch_uses_the_block_size_the_kernels_are_bounded_by() -> None:
    header = (op_library.OP_DIR / "kernel_gpu.cc").read_text()
    match = re.search(r"constexpr int64_t kCudaBlockThreads = (\d+);", header)
    assert match is not None and int(match.group(1)) == BLOCK_THREADS


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found")
def test_kernels_with_a_cuda_build_carry_it_and_still_run_on_the_cpu() -> None:
    f = tf.function(_layer_norm_and_lookup, input_signature=SIGNATURE)
    opt = tf_stitch.optimize(f, cuda=True)
    nodes = {n.name: n for n in opt.graph_def.node if n.op == "StitchedKernel"}
    assert len(nodes) == 2 and all(n.attr["_kernel"].s == b"cuda" for n in nodes.values())
    sources = {k.node: k.cuda_source for k in opt.kernels}
    for name, node in nodes.items():
        key = node.attr["cuda_key"].s.decode()
        assert (cache.cache_dir() / "cuda" / key[:2] / f"{key}.fatbin").is_file()
        # The op looks up the function the source defines, named after the source.
        function = node.attr["kernel_name"].s.decode()
        assert function.startswith("ts_") and f" {function}(" in sources[name]
    by_gathers = {n.attr["cuda_gathers"].b: n for n in nodes.values()}
    norm, lookup = by_gathers[False], by_gathers[True]
    assert norm.attr["cuda_launch"].s == b"blocks" and list(norm.attr["row_dims"].list.i) == [64]
    assert lookup.attr["cuda_launch"].s == b"elements"  # the gathered rows, elementwise
    xs = _inputs(5)
    assert_close(f(*xs), opt(*xs))


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found")
def test_a_kernel_with_a_matmul_tile_has_a_cuda_build() -> None:
    w = tf.constant(np.random.default_rng(1).standard_normal([32, 24]).astype(np.float32))
    f = tf.function(lambda x: tf.tanh(tf.matmul(x, w) + 1.0) * 2.0, input_signature=[S([None, 32])])
    opt = tf_stitch.optimize(f, cuda=True)
    (node,) = [n for n in opt.graph_def.node if n.op == "StitchedKernel"]
    assert node.attr["_kernel"].s == b"cuda" and node.attr["cuda_launch"].s == b"blocks"
    x = tf.random.normal([7, 32])
    assert_close(f(x), opt(x))


def test_elementwise_kernels_launch_a_thread_per_element() -> None:
    if find_nvcc() is None:
        pytest.skip("nvcc not found")
    f = tf.function(lambda x: tf.tanh(x) * 2.0 + 1.0, input_signature=[S([None, 10])])
    opt = tf_stitch.optimize(f, cuda=True)
    (node,) = [n for n in opt.graph_def.node if n.op == "StitchedKernel"]
    assert node.attr["cuda_launch"].s == b"elements"
    x = tf.random.normal([3, 10])
    assert_close(f(x), opt(x))


def test_without_nvcc_one_warning_and_cpu_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_compiler, "find_nvcc", lambda: None)
    f = tf.function(_layer_norm_and_lookup, input_signature=SIGNATURE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt = tf_stitch.optimize(f, cuda=True)
    messages = [str(w.message) for w in caught if "nvcc" in str(w.message)]
    assert len(messages) == 1 and "CPU kernels are unaffected" in messages[0]
    assert all(not n.attr["_kernel"].s for n in opt.graph_def.node if n.op == "StitchedKernel")
    xs = _inputs(2)
    assert_close(f(*xs), opt(*xs))
