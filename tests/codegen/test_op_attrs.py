"""The StitchedKernel attributes: sizes bound at run time are encoded as symbols."""

from __future__ import annotations

import tensorflow as tf

from tf_stitch.codegen.lower import lower
from tf_stitch.codegen.op_attrs import stitched_kernel_attrs
from tf_stitch.fusion.planner import plan_groups
from tf_stitch.graph.frontends import load


def _kernel(fn, *specs):  # type: ignore[no-untyped-def]
    graph = load(tf.function(fn).get_concrete_function(*specs)).graph
    plan = plan_groups(graph)
    assert len(plan.groups) == 1
    return lower(graph, plan.groups[0], "k")


def test_dynamic_batch_is_symbol_zero_everywhere() -> None:
    kernel = _kernel(
        lambda x, b: tf.nn.relu(x + b) * 2.0, tf.TensorSpec([None, 7, 16]), tf.TensorSpec([16])
    )
    attrs = stitched_kernel_attrs(kernel, "src", "0" * 64)
    assert list(attrs["input_ranks"].items) == [3, 1]
    assert list(attrs["input_dims"].items) == [-1, 7, 16, 16]
    assert list(attrs["output_ranks"].items) == [3]
    assert list(attrs["output_dims"].items) == [-1, 7, 16]
    # units of a batch point each: the bias repeats along its 7 x 16 row (a periodic read)
    assert list(attrs["unit_dims"].items) == [-1]
    assert attrs["Tin"].kind == "type" and [t.name for t in attrs["Tin"].items] == ["float32"] * 2
    assert attrs["unit_cost"] > 0 and attrs["source"] == b"src"


def test_static_shapes_have_no_symbols() -> None:
    kernel = _kernel(lambda x: x - tf.reduce_max(x, -1, keepdims=True) * 2.0, tf.TensorSpec([3, 5]))
    attrs = stitched_kernel_attrs(kernel, "", "0" * 64)
    assert all(d >= 0 for d in attrs["input_dims"].items + attrs["output_dims"].items)
    assert list(attrs["unit_dims"].items) == [3]
