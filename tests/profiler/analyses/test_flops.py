"""FLOPs and bytes from shapes, against hand-computed values."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from tests.profiler.analyses.conftest import PREFIX
from tf_stitch.profiler.analyses.flops import executed_costs, executed_types, op_costs, op_flops
from tf_stitch.profiler.store.profile import Profile


def test_conv2d_is_two_flops_per_multiply_add() -> None:
    # [2,16,16,3] * [3,3,3,4] -> [2,14,14,4]: 1568 outputs, each 3*3*3 = 27 multiply-adds.
    assert op_flops("Conv2D", [[2, 16, 16, 3], [3, 3, 3, 4]], [[2, 14, 14, 4]], {}) == 84672


def test_depthwise_conv_counts_only_its_window() -> None:
    # [1,112,112,32] depthwise 3x3 (multiplier 1): 401408 outputs x 9 multiply-adds.
    flops = op_flops(
        "DepthwiseConv2dNative", [[1, 112, 112, 32], [3, 3, 32, 1]], [[1, 112, 112, 32]], {}
    )
    assert flops == 2 * 401408 * 9 == 7225344


def test_matmul_reads_the_transposed_dimension() -> None:
    # [64,128] x [128,256]: 64*256 outputs x 128.
    assert op_flops("MatMul", [[64, 128], [128, 256]], [[64, 256]], {}) == 4194304
    # transpose_a: A is [128,64] -> K is its first axis (128).
    assert (
        op_flops("MatMul", [[128, 64], [128, 256]], [[64, 256]], {"transpose_a": True}) == 4194304
    )


def test_batch_matmul_and_einsum() -> None:
    # [8,12,128,64] x [8,12,64,128] -> [8,12,128,128]: K = 64.
    assert (
        op_flops("BatchMatMulV2", [[8, 12, 128, 64], [8, 12, 64, 128]], [[8, 12, 128, 128]], {})
        == 2 * 8 * 12 * 128 * 128 * 64
    )
    # adj_x: x is [.., 64, 128] -> K = 64 (its second-to-last axis).
    assert (
        op_flops("BatchMatMulV2", [[2, 64, 128], [2, 64, 32]], [[2, 128, 32]], {"adj_x": True})
        == 2 * 2 * 128 * 32 * 64
    )
    # Keras attention scores: "aecd,abcd->acbe", contracted d = 64.
    flops = op_flops(
        "Einsum",
        [[1, 128, 12, 64], [1, 128, 12, 64]],
        [[1, 12, 128, 128]],
        {"equation": "aecd,abcd->acbe"},
    )
    assert flops == 2 * 12 * 128 * 128 * 64


def test_elementwise_reductions_pooling_and_movement() -> None:
    assert op_flops("AddV2", [[4, 8], [8]], [[4, 8]], {}) == 32
    assert op_flops("Mean", [[2, 12, 12, 4], [2]], [[2, 4]], {}) == 1152
    assert op_flops("MaxPool", [[1, 8, 8, 3]], [[1, 4, 4, 3]], {"ksize": [1, 2, 2, 1]}) == 192
    assert op_flops("Softmax", [[2, 10]], [[2, 10]], {}) == 100
    assert op_flops("Transpose", [[2, 3], [2]], [[3, 2]], {}) == 0
    assert math.isnan(op_flops("Relu", [[-1, 8]], [[-1, 8]], {}))


def test_bytes_count_inputs_and_outputs_once() -> None:
    ops = pd.DataFrame(
        [
            {
                "name": "m",
                "op": "MatMul",
                "inputs": ["a:0", "b:0"],
                "input_shapes": [[4, 8], [8, 2]],
                "input_dtypes": ["float32", "float32"],
                "output_shapes": [[4, 2]],
                "output_dtypes": ["float32"],
                "attrs": {},
            }
        ]
    )
    row = op_costs(ops).iloc[0]
    assert (row.flops, row.bytes) == (2 * 8 * 8, 4 * (32 + 16 + 8))


def test_fused_ops_take_the_ops_grappler_folded_into_them(recorded: Profile) -> None:
    ops = recorded.spans[recorded.spans.level == "op"]
    costs = executed_costs(recorded.ops, executed_types(ops)).set_index("name")
    conv = costs.loc[PREFIX + "conv_1/BiasAdd"]  # ran as _FusedConv2D: Conv2D + BiasAdd
    assert conv.op == "_FusedConv2D"
    assert sorted(conv.members) == [PREFIX + "conv_1/BiasAdd", PREFIX + "conv_1/convolution"]
    assert conv.flops == 84672 + 1568
    # input 2*16*16*3 floats, filter 3*3*3*4, bias 4, output 2*14*14*4.
    assert conv.bytes == 4 * (1536 + 108 + 4 + 1568) == 12864
    dense = costs.loc[PREFIX + "dense_1/BiasAdd"]  # _FusedMatMul: [2,4] x [4,5] + bias
    assert (dense.flops, dense.bytes) == (2 * 10 * 4 + 10, 4 * (8 + 20 + 5 + 10))
    dw = costs.loc[PREFIX + "dw_1/depthwise"]
    assert (dw.flops, dw.bytes) == (2 * 1152 * 9, 4 * (1568 + 36 + 1152))
    # The convolution did not run on its own: it has no row of its own.
    assert PREFIX + "conv_1/convolution" not in costs.index


@pytest.mark.parametrize("op", ["ReadVariableOp", "Reshape", "Identity"])
def test_ops_that_move_no_data_have_no_bytes(op: str) -> None:
    ops = pd.DataFrame(
        [
            {
                "name": "n",
                "op": op,
                "inputs": ["a:0"],
                "input_shapes": [[4]],
                "input_dtypes": ["float32"],
                "output_shapes": [[4]],
                "output_dtypes": ["float32"],
                "attrs": {},
            }
        ]
    )
    assert op_costs(ops).iloc[0].bytes == 0
