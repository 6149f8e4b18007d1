"""outline: each planned group becomes one StitchedKernel node with the op's attributes."""

from __future__ import annotations

import pytest
import tensorflow as tf
from graph_helpers import assert_same_values, graph_of, ops, spec

from tf_stitch.graph.ir import TensorRef
from tf_stitch.passes.base import Options, PassContext
from tf_stitch.passes.outline import outline
from tf_stitch.passes.stitch import stitch
from tf_stitch.runtime import op_library
from tf_stitch.runtime.compilers import COMPILERS


def softmax(x: tf.Tensor) -> tf.Tensor:
    e = tf.exp(x - tf.reduce_max(x, -1, keepdims=True))
    return e / tf.reduce_sum(e, -1, keepdims=True)


def _plan(fn, *specs):  # type: ignore[no-untyped-def]
    g = graph_of(fn, *specs)
    ctx = PassContext(compilers=COMPILERS)
    return stitch.run(g, ctx), ctx


def test_replaces_each_group_and_keeps_fetched_names() -> None:
    op_library.load()

    def fn(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        m = tf.reduce_max(x, -1, keepdims=True)
        e = tf.exp(x - m)
        return e / tf.reduce_sum(e, -1, keepdims=True), m * 2.0

    g, ctx = _plan(fn, spec(None, 12))
    out = outline.run(g, ctx)
    assert ops(out)["StitchedKernel"] == 1
    kernel = next(n for n in out if n.op == "StitchedKernel")
    assert len(kernel.outputs) == 2
    assert kernel.attrs["kernel_name"] == kernel.name.replace("/", "_").encode()
    assert len(kernel.attrs["cache_key"]) == 64
    assert out.outputs == g.outputs  # fetches keep their names (Identity nodes read the kernel)
    for ref in out.outputs:
        assert out.node(ref.node).inputs[0].node == kernel.name
    assert ctx.kernels and ctx.kernels[0].node == kernel.name
    assert_same_values(g, out, batch=4)


def test_groups_that_feed_each_other_are_wired_to_the_new_kernels() -> None:
    op_library.load()

    def fn(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
        h = softmax(x * 0.5)
        return tf.nn.relu(tf.matmul(h, w) + h) * 2.0

    g, ctx = _plan(fn, spec(None, 8), spec(8, 8))
    out = outline.run(g, ctx)
    kernels = [n for n in out if n.op == "StitchedKernel"]
    assert len(kernels) == 2
    names = {k.name for k in kernels}
    assert any(TensorRef.parse(str(r)).node in names for k in kernels for r in k.inputs)
    assert_same_values(g, out, batch=3)


def test_without_compiling_the_keys_are_still_computed() -> None:
    g = graph_of(lambda x: softmax(x) * 2.0, spec(None, 8))
    ctx = PassContext(Options(compile=False), compilers=COMPILERS)
    out = outline.run(stitch.run(g, ctx), ctx)
    kernel = next(n for n in out if n.op == "StitchedKernel")
    assert len(kernel.attrs["cache_key"]) == 64


def test_without_compilers_it_says_what_it_needs() -> None:
    g = graph_of(lambda x: softmax(x) * 2.0, spec(None, 8))
    ctx = PassContext(Options(compile=False))
    planned = stitch.run(g, ctx)
    with pytest.raises(ValueError, match=r"builds kernels with ctx\.compilers"):
        outline.run(planned, ctx)


def test_groups_of_the_same_structure_share_one_source_and_one_compile() -> None:
    """Two layers alike (a BERT's twelve): their kernels' sources are the same text, so they
    have one cache key and are compiled once; explain() still names each kernel's ops."""
    import tf_stitch

    w1 = tf.random.stateless_normal([16, 16], seed=[1, 1])
    w2 = tf.random.stateless_normal([16, 16], seed=[2, 2])

    def layer(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
        y = tf.matmul(x, w)
        m = tf.reduce_mean(y, -1, keepdims=True)
        v = tf.reduce_mean(tf.square(y - m), -1, keepdims=True)
        return tf.nn.gelu((y - m) * tf.math.rsqrt(v + 1e-5))

    f = tf.function(lambda x: layer(layer(x, w1), w2), input_signature=[spec(None, 16)])
    optimized = tf_stitch.optimize(f)
    assert len(optimized.kernels) == 2
    first, second = optimized.kernels
    assert first.source == second.source and first.cache_key == second.cache_key
    assert first.members != second.members  # each names its own ops
    # The CUDA builds too: one source, its function named after it.
    assert first.cuda_source and first.cuda_source == second.cuda_source
    assert "__global__ void __launch_bounds__(256) ts_" in first.cuda_source
    x = tf.random.stateless_normal([3, 16], seed=[3, 3])
    tf.debugging.assert_near(optimized(x), f(x), rtol=1e-5, atol=1e-5)
