"""bench/host_twin.py: the GPU plan's NCHW convolutions (and the epilogues Grappler fuses into
them) run NHWC between transposes, which the count leaves out; the count and the outputs are
those of the plan run as it is."""

from __future__ import annotations

import tensorflow as tf

import tf_stitch
from tf_stitch.bench.gpu_plan import count_gpu_plan, without_twin_nodes
from tf_stitch.bench.host_twin import host_twin, is_twin_node
from tf_stitch.graph.ir import AttrList
from tf_stitch.launches.op_launches import OpLaunches
from tf_stitch.profiler.trace.op_events import OpRun

W1 = tf.random.stateless_normal([3, 3, 4, 8], seed=[1, 2])
B1 = tf.random.stateless_normal([8], seed=[3, 2])
W2 = tf.random.stateless_normal([3, 3, 8, 1], seed=[1, 3])
W3 = tf.random.stateless_normal([1, 1, 8, 8], seed=[1, 4])
SPEC = [tf.TensorSpec([1, 16, 16, 4])]


def cnn(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """A dilated convolution + bias + ReLU (Grappler fuses them), a depthwise one reading it, a
    strided 1x1 one reading that (convolution into convolution), a pool, and an output that is
    a convolution's result."""
    y = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, W1, 1, "SAME", dilations=2), B1))
    z = tf.nn.depthwise_conv2d(y, W2, [1, 1, 1, 1], "SAME")
    z = tf.nn.conv2d(z, W3, 2, "VALID")
    pooled = tf.nn.max_pool2d(y, 2, 2, "VALID")
    return tf.reduce_mean(tf.nn.silu(z) * 0.5 + pooled, [1, 2]), z


def _gpu_plan() -> tf_stitch.OptimizedFunction:
    concrete = tf.function(cnn, input_signature=SPEC).get_concrete_function()
    return tf_stitch.optimize(concrete, conv_layout="NCHW")


def test_the_twin_moves_each_nchw_convolution_and_its_epilogue_to_nhwc() -> None:
    plan = _gpu_plan().graph
    twin, perms, moved = host_twin(plan)
    convs = [n for n in plan if n.op in ("Conv2D", "DepthwiseConv2dNative")]
    assert convs and all(n.attrs["data_format"] == b"NCHW" for n in convs)
    assert moved == len(convs)
    for conv in convs:
        twin_conv = twin.node(conv.name)
        assert twin_conv.attrs["data_format"] == b"NHWC"
        assert twin.node(twin_conv.inputs[0].node).op == "Transpose"
        assert is_twin_node(twin_conv.inputs[0].node)
        before, after = conv.outputs[0].shape, twin_conv.outputs[0].shape
        assert after == (before[0], before[2], before[3], before[1])
        for key in ("strides", "dilations"):
            old, new = conv.attrs[key], twin_conv.attrs[key]
            assert isinstance(old, AttrList) and isinstance(new, AttrList)
            assert new.items == (old.items[0], old.items[2], old.items[3], old.items[1])
    # every reader of a moved node's result reads it through the twin's transpose back
    moved_names = {n.name for n in plan if twin.node(n.name).outputs != n.outputs}
    assert {"BiasAdd", "Relu"} <= moved_names  # the epilogue Grappler fuses moved too
    for node in twin:
        if is_twin_node(node.name):
            continue
        for ref in node.inputs:
            assert ref.node not in moved_names or node.name in moved_names
    assert all(ref.node not in moved_names for ref in twin.outputs)
    assert sorted(tuple(p) for p in perms.values()) == [(0, 2, 3, 1), (0, 3, 1, 2)]
    # nothing else changed: the plan's nodes are all there, with their names
    assert set(plan.nodes) <= set(twin.nodes)
    assert all(is_twin_node(n) for n in set(twin.nodes) - set(plan.nodes))


def test_a_graph_without_nchw_convolutions_has_no_twin() -> None:
    concrete = tf.function(cnn, input_signature=SPEC).get_concrete_function()
    plan = tf_stitch.optimize(concrete, conv_layout="NHWC").graph
    twin, perms, moved = host_twin(plan)
    assert (moved, perms) == (0, {}) and set(twin.nodes) == set(plan.nodes)


def test_the_twins_count_and_outputs_are_the_plans() -> None:
    x = tf.random.stateless_normal([1, 16, 16, 4], seed=[5, 6])
    as_is = count_gpu_plan(cnn, SPEC, [x], nhwc_on_host=False)
    twin = count_gpu_plan(cnn, SPEC, [x], nhwc_on_host=True)
    assert as_is.outputs_match and twin.outputs_match
    assert twin.max_abs_error < 1e-4
    assert (twin.kernels, twin.by_type) == (as_is.kernels, as_is.by_type)
    # Grappler fused the bias and ReLU into the first convolution in both
    assert twin.by_type.get("_FusedConv2D") == 1 and "BiasAdd" not in twin.by_type
    assert any("3 NCHW convolutions run NHWC" in n for n in twin.notes), twin.notes


def test_the_twins_transposes_leave_the_count() -> None:
    runs = {
        OpRun("stitched/conv", "Conv2D"): 1,
        OpRun("stitched/conv/host_twin/to_nhwc", "Transpose"): 1,
        OpRun("stitched/conv/host_twin/to_nchw", "Transpose"): 1,
        OpRun("stitched/input_to_nchw", "Transpose"): 1,
    }
    ops = OpLaunches(4, 4, 4, {"Conv2D": 1, "Transpose": 3}, {}, runs)
    left = without_twin_nodes(ops)
    assert (left.per_step, left.min_per_step, left.max_per_step) == (2, 2, 2)
    assert left.by_type == {"Conv2D": 1, "Transpose": 1}
    assert set(left.runs) == {
        OpRun("stitched/conv", "Conv2D"),
        OpRun("stitched/input_to_nchw", "Transpose"),
    }
