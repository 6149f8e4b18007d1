"""launches/hlo_proto.py: XLA's optimized module read from its HloModuleProto counts the same
kernels as its text did, for XLA:CPU on every workload and on held-out Keras models, and for
XLA:GPU (deviceless) on three workloads (the comparison stays while both readers do); the
proto's errors are clear."""

from __future__ import annotations

from typing import Any

import keras
import pytest
import tensorflow as tf

from tf_stitch.launches.hlo_copies import without_copies
from tf_stitch.launches.hlo_kernels import (
    compiler_ir,
    count_hlo_kernels,
    count_module_kernels,
    count_xla_cpu_launches,
)
from tf_stitch.launches.hlo_proto import module_from_proto
from tf_stitch.launches.xla_gpu import count_xla_gpu_launches, optimized_gpu_module
from tf_stitch.workloads import WORKLOADS


def _both(fn: Any, inputs: Any) -> tuple[Any, Any]:
    text = count_hlo_kernels(compiler_ir(fn, inputs, "optimized_hlo"))
    proto = count_module_kernels(
        module_from_proto(compiler_ir(fn, inputs, "optimized_hlo_serialized"))
    )
    return text, proto


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_workload_counts_the_same_from_the_proto(name: str) -> None:
    w = WORKLOADS[name].build(small=True)
    text, proto = _both(w.fn, w.inputs)
    assert proto == text and proto.total > 0


def _keras(model: keras.Model, *shape: int) -> tuple[Any, Any]:
    return tf.function(lambda x: model(x, training=False)), (tf.ones(shape),)


def test_held_out_models_count_the_same_from_the_proto() -> None:
    keras.utils.set_random_seed(0)
    cnn = keras.applications.MobileNetV2(weights=None, input_shape=(64, 64, 3), alpha=0.35)
    inp = keras.Input((9, 6))
    lstm = keras.Model(inp, keras.layers.LSTM(8)(keras.layers.LayerNormalization()(inp)))

    @tf.function
    def loop_and_branch(x: tf.Tensor) -> tf.Tensor:
        _, y = tf.while_loop(lambda i, a: i < 5, lambda i, a: (i + 1, tf.tanh(a) * 2.0), [0, x])
        return tf.cond(tf.reduce_sum(y) > 0, lambda: y * 3.0, lambda: tf.exp(y)) + 1.0

    for fn, inputs in (_keras(cnn, 2, 64, 64, 3), _keras(lstm, 3, 9, 6)):
        text, proto = _both(fn, inputs)
        assert proto == text and proto.total > 0
    text, proto = _both(loop_and_branch, (tf.ones([4, 8]),))
    assert proto == text and proto.by_opcode.get("fusion", 0) > 0  # the loop's, times 5
    assert count_xla_cpu_launches(loop_and_branch, (tf.ones([4, 8]),)) == proto


def test_bad_bytes_and_empty_modules_are_refused() -> None:
    with pytest.raises(ValueError, match="not a serialized HloModuleProto"):
        module_from_proto(b"\xff\xff\xff not a proto")
    with pytest.raises(ValueError, match="no HLO computations"):
        module_from_proto(b"")


@pytest.mark.parametrize("name", ["bert", "birnn", "dien"])
def test_xla_gpu_modules_count_the_same_from_the_proto(name: str) -> None:
    """XLA:GPU's optimized module (compiled deviceless for an H100) as text and as proto."""
    w = WORKLOADS[name].build(small=True)
    unoptimized = without_copies(compiler_ir(w.fn, w.inputs, "hlo_serialized"))
    text, proto = optimized_gpu_module(unoptimized, "h100")
    from_text = count_hlo_kernels(text)
    assert count_module_kernels(module_from_proto(proto)) == from_text and from_text.total > 0
    assert count_xla_gpu_launches(w.fn, w.inputs) == from_text
