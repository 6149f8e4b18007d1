"""hlo_copies: the copies of an unoptimized HLO module are bypassed, so that XLA:GPU compiles
deviceless the modules of training steps and Keras LSTMs (whose returned values were copies)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from graph_helpers import mse_step
from tensorflow.compiler.xla.service import hlo_pb2

from tf_stitch.launches.hlo_copies import without_copies
from tf_stitch.launches.hlo_kernels import compiler_ir
from tf_stitch.launches.xla_gpu import count_xla_gpu_launches, unavailable


def _training_step() -> tuple[object, list[tf.Tensor]]:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16), keras.layers.Dense(1)])
    opt = keras.optimizers.SGD(0.1, momentum=0.9)
    opt.build(model.trainable_variables)
    return mse_step(model, opt), [tf.ones([4, 8]), tf.ones([4, 1])]


def _opcodes(proto: bytes) -> list[str]:
    module = hlo_pb2.HloModuleProto.FromString(proto)
    return [i.opcode for c in module.computations for i in c.instructions]


def test_copies_are_bypassed_and_every_reference_stays_valid() -> None:
    step, inputs = _training_step()
    proto = compiler_ir(step, inputs, "hlo_serialized")
    assert "copy" in _opcodes(proto)
    out = hlo_pb2.HloModuleProto.FromString(without_copies(proto))
    before = hlo_pb2.HloModuleProto.FromString(proto)
    for computation in out.computations:
        ids = {i.id for i in computation.instructions}
        assert computation.root_id in ids
        for i in computation.instructions:
            assert i.opcode != "copy"
            assert set(i.operand_ids) <= ids and set(i.control_predecessor_ids) <= ids
    kept = sum(len(c.instructions) for c in out.computations)
    copies = _opcodes(proto).count("copy")
    assert kept == sum(len(c.instructions) for c in before.computations) - copies
    again = hlo_pb2.HloModuleProto.FromString(without_copies(without_copies(proto)))
    assert again == out  # messages compared: a map's serialized order may differ


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_xla_gpu_counts_a_training_step() -> None:
    step, inputs = _training_step()
    counted = count_xla_gpu_launches(step, inputs, "h100")
    assert counted.total > 0 and np.isfinite(counted.total)
