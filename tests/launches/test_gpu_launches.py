"""The tf_stitch GPU count: ops a real CPU run executed, mapped to the kernels a GPU runs."""

from __future__ import annotations

import pytest
import tensorflow as tf

import tf_stitch
from tf_stitch.graph.ir import Graph, Node, TensorInfo, TensorRef
from tf_stitch.launches.gpu_launches import (
    adopts_value,
    count_gpu_launches,
    einsum_kernels,
    gpu_op_type,
    runs_on_host,
)
from tf_stitch.launches.op_launches import OpLaunches
from tf_stitch.profiler.trace.op_events import OpRun


def test_cpu_only_variants_count_as_the_op_they_replace() -> None:
    assert gpu_op_type("_MklNativeConv2D") == "Conv2D"
    assert gpu_op_type("_MklMatMul") == "MatMul"
    assert gpu_op_type("_MklFusedMatMul") == "_FusedMatMul"
    assert gpu_op_type("_MklNativeFusedConv2D") == "_FusedConv2D"
    assert gpu_op_type("_MklNativePadWithFusedConv2D") == "_PadWithFusedConv2D"
    assert gpu_op_type("Relu") == "Relu"


@pytest.mark.parametrize(
    ("equation", "kernels"),
    [
        ("bij,bjk->bik", 1),  # a batch matmul as is
        ("abc,cd->abd", 1),  # Keras EinsumDense: a reshape and a GEMM
        ("bij,bkj->bik", 1),  # the right operand transposed by the GEMM (adjoint)
        ("BTNH,BSNH->BNTS", 3),  # attention scores: both operands transposed
        ("BNTS,BSNH->BTNH", 3),  # attention context: the right operand and the result
        ("ij,jk->ki", 2),  # the result transposed
        ("ijk,jl->il", 2),  # k summed out of one operand first
        ("ij->ji", 1),
        ("...ij,...jk->...ik", 4),
    ],
)
def test_einsum_kernels_follow_tensorflows_einsum(equation: str, kernels: int) -> None:
    assert einsum_kernels(equation) == kernels


def test_einsum_equations_it_cannot_read_are_refused() -> None:
    for bad in ("ij,jk", "a,b,c->abc", ",->"):
        with pytest.raises(ValueError, match="einsum"):
            einsum_kernels(bad)


def _node(name: str, op: str, inputs: list[str], dtype: str, **attrs: object) -> Node:
    refs = [TensorRef.parse(i) for i in inputs]
    return Node(name, op, refs, dict(attrs), [TensorInfo(dtype, (4, 8))])


def _graph(*nodes: Node) -> Graph:
    return Graph(nodes={n.name: n for n in nodes})


def test_int32_ops_run_on_the_host_and_launch_nothing() -> None:
    g = _graph(
        _node("shape_a", "Placeholder", [], "int32"),
        _node("x", "Placeholder", [], "float32"),
        _node("dims", "AddV2", ["shape_a", "shape_a"], "int32"),
        _node("mask", "Less", ["shape_a", "shape_a"], "bool"),
        _node("zeros", "Fill", ["dims", "x"], "float32"),
    )
    assert runs_on_host(g, g.node("dims")) and runs_on_host(g, g.node("mask"))
    assert not runs_on_host(g, g.node("zeros"))  # float output: a GPU kernel
    assert not runs_on_host(g, g.node("x"))  # no inputs
    ops = OpLaunches(
        3,
        3,
        3,
        runs={
            OpRun(f"stitched/{n}", t): 1
            for n, t in (("dims", "AddV2"), ("mask", "Less"), ("zeros", "Fill"))
        },
    )
    got = count_gpu_launches(ops, g, cuda_kernels=())
    assert (got.total, got.by_type, got.on_host) == (1, {"Fill": 1}, {"AddV2": 1, "Less": 1})


def test_an_assign_of_a_value_nothing_else_reads_launches_nothing() -> None:
    g = _graph(
        _node("h", "Placeholder", [], "resource"),
        _node("x", "Placeholder", [], "float32"),
        _node("new", "StitchedKernel", ["x"], "float32"),
        _node("shared", "AddV2", ["x", "x"], "float32"),
        _node("reader", "Relu", ["shared"], "float32"),
        _node("adopts", "AssignVariableOp", ["h", "new"], "float32"),
        _node("copies", "AssignVariableOp", ["h", "shared"], "float32"),
        _node("held", "AssignVariableOp", ["h", "x"], "float32"),
    )
    assert adopts_value(g, g.node("adopts"))
    assert not adopts_value(g, g.node("copies"))  # `reader` holds the value too
    assert not adopts_value(g, g.node("held"))  # a Placeholder's value is held by its feed
    runs = {OpRun(f"stitched/{n}", "AssignVariableOp"): 1 for n in ("adopts", "copies", "held")}
    got = count_gpu_launches(OpLaunches(3, 3, 3, runs=runs), g, cuda_kernels=())
    assert got.by_type == {"AssignVariableOp": 2}
    assert any("1 AssignVariableOp took over" in n for n in got.notes)


def test_a_loop_s_tensor_list_bookkeeping_runs_on_the_host() -> None:
    g = _graph(_node("x", "Placeholder", [], "float32"))
    runs = {
        OpRun("stitched/while/body/push", "TensorListPushBack"): 20,  # not in the graph (a body)
        OpRun("stitched/while/body/pop", "TensorListPopBack"): 20,
        OpRun("stitched/stack", "TensorListStack"): 1,  # a concatenation: one kernel
    }
    got = count_gpu_launches(OpLaunches(41, 41, 41, runs=runs), g, cuda_kernels=())
    assert got.by_type == {"TensorListStack": 1}
    assert got.on_host == {"TensorListPopBack": 20, "TensorListPushBack": 20}


def test_multi_kernel_ops_layouts_and_stitched_kernels() -> None:
    g = _graph(
        _node("x", "Placeholder", [], "float32"),
        _node("sm", "Softmax", ["x"], "float32"),
        _node("conv_nhwc", "Conv2D", ["x", "x"], "float32", data_format=b"NHWC"),
        _node("conv_nchw", "Conv2D", ["x", "x"], "float32", data_format=b"NCHW"),
        _node("mm", "MatMul", ["x", "x"], "float32"),
        _node("att", "Einsum", ["x", "x"], "float32", equation=b"BTNH,BSNH->BNTS"),
        _node("k_cuda", "StitchedKernel", ["x"], "float32"),
        _node("k_cpu", "StitchedKernel", ["x"], "float32"),
    )
    runs = {
        OpRun("stitched/sm", "Softmax"): 1,
        OpRun("stitched/conv_nhwc", "_MklNativeConv2D"): 1,
        OpRun("stitched/conv_nchw", "_MklNativeConv2D"): 1,
        OpRun("stitched/mm", "_MklMatMul"): 2,  # ran twice in the step
        OpRun("stitched/att", "_MklEinsum"): 1,
        OpRun("stitched/k_cuda", "StitchedKernel"): 1,
        OpRun("stitched/k_cpu", "StitchedKernel"): 1,
        OpRun("stitched/Grappler/made_this", "_MklBatchMatMulV2"): 1,
    }
    got = count_gpu_launches(OpLaunches(9, 9, 9, runs=runs), g, cuda_kernels={"k_cuda"})
    assert got.by_type == {
        "BatchMatMulV2": 1,
        "Conv2D": 1 + 1,  # the layout optimizer's transposes are counted on the graph
        "Einsum": 3,
        "MatMul": 2,
        "Softmax": 3,
        "StitchedKernel": 2,
    }
    assert got.total == sum(got.by_type.values()) == 13
    assert any("k_cpu: no CUDA source" in n for n in got.notes)
    assert any("BatchMatMulV2 x1" in n for n in got.notes)


def test_measured_on_a_real_run() -> None:
    w = tf.random.normal([64, 32])

    def fn(x: tf.Tensor) -> tf.Tensor:
        m = tf.reduce_mean(x, -1, keepdims=True)
        h = tf.nn.relu((x - m) * 2.0)
        zeros = tf.zeros(tf.stack([tf.shape(x)[0], 32]))  # int32 shape arithmetic and a Fill
        return tf.nn.softmax(tf.matmul(h, w) + zeros)

    report = tf_stitch.count_launches(fn, tf.random.normal([16, 64]))
    gpu = report.tf_stitch_gpu_detail
    assert gpu is not None and report.tf_stitch_gpu == gpu.total == sum(gpu.by_type.values())
    assert gpu.by_type.get("StitchedKernel", 0) >= 1
    # Every op the CPU run executed is counted on the GPU side or named as a host op.
    cpu_ops = report.tf_stitch_detail.by_type
    assert sum(cpu_ops.values()) == report.tf_stitch
    assert set(gpu_op_type(t) for t in cpu_ops) == set(gpu.by_type) | set(gpu.on_host)
    assert "tf_stitch on a GPU" in str(report)


def test_a_loop_s_counter_runs_on_the_host_in_both_runs() -> None:
    """A While's counter and bound (int32 ops of its body and condition, library functions)
    launch no GPU kernel, in TensorFlow's run and in tf_stitch's alike; its float ops do."""

    def fn(x: tf.Tensor) -> tf.Tensor:
        def body(i: tf.Tensor, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            return i + 1, tf.tanh(h * 0.5 + 1.0)

        return tf.while_loop(lambda i, h: i < 5, body, (tf.constant(0), x))[1]

    report = tf_stitch.count_launches(fn, tf.random.normal([4, 8]))
    for gpu in (report.tf_gpu_detail, report.tf_stitch_gpu_detail):
        assert gpu is not None
        assert gpu.on_host.get("Less", 0) >= 6 and gpu.on_host.get("AddV2", 0) >= 5, gpu
        assert "Less" not in gpu.by_type, gpu
        assert not any("Grappler made them" in n for n in gpu.notes), gpu.notes
    stitched = report.tf_stitch_gpu_detail
    assert stitched is not None and stitched.by_type.get("StitchedKernel", 0) >= 5
    # the body's kernel has CUDA source (it is found by the name the lowered loop gives it)
    assert not any("no CUDA source" in n for n in stitched.notes), stitched.notes


@pytest.mark.parametrize(
    ("shape", "begin", "size", "view"),
    [
        ((20, None, 256), [3, 0, 0], [1, -1, -1], True),  # a step of a batched projection
        ((20, None, 256), [3, 0, 0], [1, -1, 128], False),  # half a row: a copy
        ((20, None, 256), [0, 1, 0], [1, -1, -1], False),  # not whole rows of axis 0
        ((20, 3), [1, 0], [1, -1], False),  # 12-byte rows: not aligned, a copy
        ((20,), [4], [2], False),  # a vector: its ends' alignment decides; counted
    ],
)
def test_a_slice_of_aligned_leading_rows_is_a_view(
    shape: tuple[int | None, ...], begin: list[int], size: list[int], view: bool
) -> None:
    import numpy as np

    from tf_stitch.graph.ir import TensorValue
    from tf_stitch.launches.gpu_launches import is_row_view

    def const(name: str, value: list[int]) -> Node:
        array = np.asarray(value, np.int32)
        return Node(
            name,
            "Const",
            [],
            {"value": TensorValue(array, "int32")},
            [TensorInfo("int32", array.shape)],
        )

    x = Node("x", "Placeholder", [], {}, [TensorInfo("float32", shape)])
    cut = Node(
        "cut",
        "Slice",
        [TensorRef.parse(n) for n in ("x", "b", "s")],
        {},
        [TensorInfo("float32", None)],
    )
    g = _graph(x, const("b", begin), const("s", size), cut)
    assert is_row_view(g, cut) is view
    got = count_gpu_launches(OpLaunches(1, 1, 1, runs={OpRun("stitched/cut", "Slice"): 1}), g, ())
    assert got.total == (0 if view else 1)
    assert any("aligned leading rows" in n for n in got.notes) is view
