"""lower: one planned group -> kernel IR (loops, per-row statements, reductions, buffers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from tf_stitch.codegen.kernel_ir import (
    Access,
    Accumulate,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Kernel,
    Let,
    Lit,
    Load,
    ReduceResult,
    Reduction,
    Store,
)
from tf_stitch.codegen.lower import access_of, lower
from tf_stitch.codegen.sizes import dim
from tf_stitch.fusion.layout_types import FULL, Placement
from tf_stitch.fusion.planner import PlannerOptions, plan_groups
from tf_stitch.graph import frontends
from tf_stitch.graph.ir import TensorRef

S = tf.TensorSpec


def kernel_of(fn: Callable[..., Any], *specs: tf.TensorSpec, budget: int = 20 * 1024) -> Kernel:
    graph = frontends.load(tf.function(fn).get_concrete_function(*specs)).graph
    (group,) = plan_groups(graph, PlannerOptions(on_chip_budget=budget)).groups
    return lower(graph, group, "k")


def calls(stmts: list[Any]) -> list[str]:
    return [s.expr.op for s in stmts if isinstance(s, Let) and isinstance(s.expr, Call)]


def lets_of(stmts: list[Any], kind: type) -> list[Let]:
    return [s for s in stmts if isinstance(s, Let) and isinstance(s.expr, kind)]


def all_args(k: Kernel) -> list[Any]:
    stmts = [s for block in k.row_stmts + k.loops for s in block]
    return [
        a for s in stmts if isinstance(s, Let) and isinstance(s.expr, Call) for a in s.expr.args
    ]


def layer_norm(x: tf.Tensor) -> tf.Tensor:
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.square(x - m), -1, keepdims=True)
    return (x - m) * tf.math.rsqrt(v + 1e-5)


def softmax(x: tf.Tensor) -> tf.Tensor:
    e = tf.exp(x - tf.reduce_max(x, -1, keepdims=True))
    return e / tf.reduce_sum(e, -1, keepdims=True)


def test_layer_norm_is_three_loops_with_two_reductions() -> None:
    k = kernel_of(layer_norm, S([None, 64]))
    d0 = dim("D0")
    assert (k.domain, k.split, k.outer, k.inner) == ((d0, 64), 1, (d0,), (64,))
    assert k.symbols == [("D0", 0, 0)]  # the batch size comes from dim 0 of input 0
    assert k.reductions == [Reduction("r0", "Mean", 0), Reduction("r1", "Mean", 1)]
    assert len(k.loops) == 3 and len(k.row_stmts) == 4
    assert [s.reduction for s in k.loops[0] if isinstance(s, Accumulate)] == ["r0"]
    assert [s.reduction for s in k.loops[1] if isinstance(s, Accumulate)] == ["r1"]
    assert calls(k.loops[1]) == ["Sub", "Square"]
    assert calls(k.loops[2]) == ["Sub", "Mul"]
    assert [s.param for s in k.loops[2] if isinstance(s, Store)] == ["out0"]
    # reduction results and the per-row math sit between the loops
    assert [s.expr for s in lets_of(k.row_stmts[1], ReduceResult)] == [ReduceResult("r0")]
    assert calls(k.row_stmts[2]) == ["AddV2", "Rsqrt"]
    assert k.row_stmts[0] == [] and k.row_stmts[3] == []
    assert k.buffers == []
    assert [p.tensor for p in k.inputs] == [TensorRef("x")]
    assert k.schedule == "row(split_dim=1, domain=[?,64], blocks=[?])"
    assert "Rsqrt (Rsqrt)" in k.members


def test_softmax_keeps_exp_in_a_row_buffer() -> None:
    k = kernel_of(softmax, S([8, 128]))
    assert k.buffers == [Buffer("buf0", "float32", 128)]
    assert calls(k.loops[1]) == ["Sub", "Exp"]
    (store,) = [s for s in k.loops[1] if isinstance(s, BufferStore)]
    (exp_let,) = [s for s in k.loops[1] if isinstance(s, Let) and s.var == store.var]
    assert exp_let.expr.op == "Exp"
    # the last loop reads exp back instead of recomputing it
    assert [s.expr for s in lets_of(k.loops[2], BufferLoad)] == [BufferLoad("buf0")]
    assert calls(k.loops[2]) == ["RealDiv"]


def test_softmax_recomputes_exp_when_the_buffer_does_not_fit() -> None:
    k = kernel_of(softmax, S([8, 128]), budget=256)
    assert k.buffers == []
    assert calls(k.loops[2]) == ["Sub", "Exp", "RealDiv"]
    assert not any(isinstance(s, BufferStore) for s in k.loops[1])


def test_softmax_with_a_dynamic_row_binds_its_size_and_buffers_nothing() -> None:
    k = kernel_of(softmax, S([8, None]))
    d1 = dim("D1")
    assert k.domain == (8, d1)
    assert k.symbols == [("D1", 0, 1)]
    assert k.buffers == []
    assert k.inputs[0].access == Access((d1, 1), "contiguous", "contiguous", d1)


def test_scalar_constants_become_exact_literals_not_inputs() -> None:
    k = kernel_of(lambda x: x * 2.5 + 1e-5, S([4, 8]))
    assert [p.tensor for p in k.inputs] == [TensorRef("x")]
    lits = [a for a in all_args(k) if isinstance(a, Lit)]
    assert Lit(2.5, "float32") in lits
    assert Lit(float(np.float32(1e-5)), "float32") in lits  # the float32 value, not 1e-5


def test_bool_constants_are_literals_too() -> None:
    k = kernel_of(lambda x: tf.logical_and(x > 0.0, True), S([4, 8]))
    assert Lit(True, "bool") in all_args(k)
    assert k.outputs[0].dtype == "bool"


def test_non_scalar_constants_are_inputs() -> None:
    gamma = np.arange(2048, dtype=np.float32)
    k = kernel_of(lambda x: tf.exp(x) * gamma, S([4, 2048]))
    assert len(k.inputs) == 2
    assert k.inputs[1].access.outer == "zero" and k.inputs[1].access.inner == "contiguous"


def test_per_row_inputs_are_loaded_once_per_row() -> None:
    k = kernel_of(lambda x, s: tf.exp(x) * s, S([4, 2048]), S([4, 1]))
    x, s = k.inputs
    assert (x.per_row, s.per_row) == (False, True)
    assert s.access == Access((1, 0), "contiguous", "zero", 1)
    assert [s.expr for s in lets_of(k.row_stmts[0], Load)] == [Load("in1")]
    assert [s.expr for s in lets_of(k.loops[0], Load)] == [Load("in0")]


def test_bias_reads_its_row_from_offset_zero() -> None:
    k = kernel_of(lambda x, b: tf.nn.relu(x + b), S([4, 2048]), S([2048]))
    assert k.inputs[1].access == Access((0, 1), "zero", "contiguous", 0)
    assert not k.inputs[1].per_row


def test_reduction_without_keepdims_is_stored_once_per_row() -> None:
    def fn(x: tf.Tensor) -> Any:
        s = tf.reduce_sum(tf.exp(x), -1)
        return s, tf.exp(x) / tf.expand_dims(s, -1)

    k = kernel_of(fn, S([4, 8]))
    per_row = [p for p in k.outputs if p.per_row]
    assert len(per_row) == 1 and per_row[0].dims == (4,)
    assert per_row[0].access == Access((1, 0), "contiguous", "zero", 1)
    assert [s.param for s in k.row_stmts[1] if isinstance(s, Store)] == [per_row[0].name]


def test_a_broadcast_inside_the_row_is_indexed_generally() -> None:
    def fn(x: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        y = x * b
        return y - tf.reduce_sum(y, [1, 2], keepdims=True)

    k = kernel_of(fn, S([2, 3, 4]), S([3, 1]))
    assert k.split == 1
    assert k.inputs[1].access == Access((0, 1, 0), "zero", "general", 0)


def test_access_of_spreads_strides_over_the_domain() -> None:
    p = Placement(FULL, (None, 1, 8), (0, 1, 2))
    assert access_of(p, (dim("D0"), 3, 8), 1) == Access((8, 0, 1), "contiguous", "general", 8)
    assert access_of(p, (dim("D0"), 3, 8), 2) == Access((8, 0, 1), "general", "contiguous", 8)
    q = Placement(FULL, (None, 3, 8), (0, 1, 2))
    assert access_of(q, (dim("D0"), 3, 8), 1) == Access((24, 8, 1), "contiguous", "contiguous", 24)


def test_ops_with_attributes_carry_them() -> None:
    k = kernel_of(lambda x: tf.cast(tf.nn.leaky_relu(x, 0.25) > 0.0, tf.float32), S([4, 8]))
    by_op = {
        a.op: a for a in [s.expr for s in k.loops[0] if isinstance(s, Let)] if isinstance(a, Call)
    }
    assert by_op["LeakyRelu"].attr("alpha") == 0.25
    assert (by_op["Cast"].attr("src"), by_op["Cast"].attr("dst")) == ("bool", "float32")


def test_unit_cost_scales_with_the_row() -> None:
    small = kernel_of(softmax, S([8, 128]))
    big = kernel_of(softmax, S([8, 256]))
    assert small.unit_cost > 0
    assert abs(big.unit_cost - 2 * small.unit_cost) <= 1  # (rounded to whole cycles)
