"""Buffer reuse: values whose lifetimes do not overlap share a row buffer."""

from __future__ import annotations

import tensorflow as tf
from conftest import assert_close, random_inputs

import tf_stitch
from tf_stitch.codegen.buffer_reuse import reuse_buffers
from tf_stitch.codegen.kernel_ir import Buffer, BufferLoad, BufferStore, Kernel, Let


def _chain(x: tf.Tensor) -> tf.Tensor:
    """Three normalizations in a row: each expensive exp is buffered for the next stage."""
    for _ in range(3):
        e = tf.exp(x)
        x = e / tf.reduce_sum(e, -1, keepdims=True)
    return x


def _kernel(loops: list[list]) -> Kernel:
    k = Kernel("k", (4, 8), 1, [], [])
    k.loops = loops
    k.buffers = [Buffer(f"buf{i}", "float32", 8) for i in range(3)]
    return k


def test_a_buffer_dead_before_another_is_stored_lends_it_its_array() -> None:
    store = [BufferStore(f"buf{i}", "v") for i in range(3)]
    load = [Let(f"l{i}", "float32", BufferLoad(f"buf{i}")) for i in range(3)]
    k = _kernel([[store[0]], [load[0], store[1]], [load[1], store[2]], [load[2]]])
    note = reuse_buffers(k)
    assert [b.name for b in k.buffers] == ["buf0", "buf1"]
    assert k.loops[2] == [load[1], BufferStore("buf0", "v")]  # buf2 took buf0's array
    assert k.loops[3] == [Let("l2", "float32", BufferLoad("buf0"))]
    assert note == "3 buffered values in 2 arrays: 64 B (96 B unshared)"


def test_a_buffer_read_in_the_loop_that_stores_another_is_not_shared() -> None:
    store = [BufferStore(f"buf{i}", "v") for i in range(3)]
    load = [Let(f"l{i}", "float32", BufferLoad(f"buf{i}")) for i in range(3)]
    k = _kernel([[store[0], store[1]], [load[0], store[2]], [load[1], load[2]]])
    assert reuse_buffers(k) == ""
    assert len(k.buffers) == 3


def test_a_kernel_of_chained_stages_shares_buffers_and_computes_the_same() -> None:
    spec = [tf.TensorSpec([None, 40])]
    f = tf.function(_chain, input_signature=spec)
    opt = tf_stitch.optimize(f)
    assert "3 buffered values in 2 arrays" in tf_stitch.explain(f)
    for batch in (1, 5):
        (x,) = random_inputs(spec, batch=batch)
        assert_close(f(x), opt(x))
