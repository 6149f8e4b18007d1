"""merge_legality: the checks every merge of two groups passes (one device, one control-flow
liveness, no cycle through outside ops, a matmul's library call kept, a layout, outputs written
once), each with the reason it refuses; and keeps_library_call, which keeps a large matmul and
its fused bias add and activation one library call when the result read is written out anyway.
(creates_cycle itself is tested in test_merge_cycles.py.)"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from graph_helpers import graph_of, spec, v1_graph

from tf_stitch.fusion.decision import Decision
from tf_stitch.fusion.legality import Context
from tf_stitch.fusion.merge import LIBRARY_GEMM_ELEMENTS, keeps_library_call, merge_legality
from tf_stitch.fusion.union_find import UnionFind
from tf_stitch.graph.ir import Graph

LIBRARY = "keeps a matmul and its fused epilogue one library call"


def merge(graph: Graph, a: Iterable[str], b: Iterable[str]) -> Decision:
    """merge_legality of groups `a` and `b`, every other node a group of its own."""
    ctx = Context(graph)
    groups = UnionFind(set(graph.nodes), ctx.late_order)
    for members in (list(a), list(b)):
        for name in members[1:]:
            groups.union(members[0], name)
    return merge_legality(ctx, set(a), set(b), set(a) | set(b), groups)


def test_refuses_a_merge_across_devices() -> None:
    graph = graph_of(lambda x: tf.tanh(tf.exp(x)), spec(4, 8))
    assert merge(graph, ["Exp"], ["Tanh"]) == Decision(True, "loop over [4,8]")
    graph.node("Tanh").device = "/device:CPU:1"
    assert merge(graph, ["Exp"], ["Tanh"]) == Decision(
        False, "crosses devices ['', '/device:CPU:1']"
    )


def test_refuses_a_merge_across_the_branches_of_a_switch() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [4, 8], name="x")
        p = tf.compat.v1.placeholder(tf.bool, [], name="p")
        taken = tf.raw_ops.Switch(data=tf.exp(x, name="e"), pred=p).output_true
        tf.tanh(taken, name="t")

    decision = merge(v1_graph(build), ["e"], ["t"])
    assert not decision
    assert decision.reason == (
        "alive under different control flow (root frame vs root frame, alive with p:0 -> 1)"
    )


def test_refuses_a_merge_with_a_path_through_an_outside_op() -> None:
    def fn(x: tf.Tensor) -> tf.Tensor:
        e = tf.exp(x)
        return e + tf.math.cumsum(e)  # Exp -> Cumsum (opaque) -> add

    decision = merge(graph_of(fn, spec(4, 8)), ["Exp"], ["add"])
    assert decision == Decision(False, "would create a cycle through nodes outside the group")
    # Cumsum reads x, not Exp: no path comes back
    graph = graph_of(lambda x: tf.exp(x) + tf.math.cumsum(x), spec(4, 8))
    assert merge(graph, ["Exp"], ["add"]) == Decision(True, "loop over [4,8]")


def test_refuses_a_merge_without_a_layout() -> None:
    def fn(x: tf.Tensor) -> Any:
        e = tf.exp(x)
        return tf.reduce_sum(e, 0), tf.reduce_max(e, 1)

    graph = graph_of(fn, spec(4, 8))
    assert merge(graph, ["Exp", "Sum"], ["Max"]) == Decision(
        False, "Max reduces axes [1] of [4,8] but Sum axes [0] of [4,8]"
    )
    assert merge(graph, ["Exp"], ["Max"]) == Decision(True, "row over [4,8]")


def test_refuses_to_compute_a_matmul_s_left_operand_in_its_kernel() -> None:
    w = tf.constant(np.ones((8, 8), np.float32))
    graph = graph_of(lambda x: tf.tanh(tf.matmul(tf.exp(x), w)), spec(None, 8))
    decision = merge(graph, ["Exp"], ["MatMul", "Tanh"])
    assert not decision
    assert decision.reason.startswith("MatMul: operand Exp:0 is computed in the group; ")
    assert merge(graph, ["MatMul"], ["Tanh"]) == Decision(True, "loop over [?,8]")


def test_refuses_an_output_that_several_units_would_write() -> None:
    def fn(x: tf.Tensor, b: tf.Tensor) -> Any:
        e = tf.exp(b)  # also an output: one [8] vector, but the merged domain is [4,8]
        return x + e, e * 3.0

    graph = graph_of(fn, spec(4, 8), spec(8))
    assert merge(graph, ["Exp"], ["add"]) == Decision(
        False, "output Exp:0 [8] would be written by several units of the [4,8] domain"
    )
    assert merge(graph, ["Exp"], ["mul"]) == Decision(True, "loop over [8]")


def _dense_and_mask(
    act: Callable[[tf.Tensor], tf.Tensor],
    w_shape: tuple[int | None, int],
    h_read_outside: bool = True,
    mask_matmul: bool = False,
    mask_reads_product: bool = False,
) -> Graph:
    """h = act(x @ w + bias) and the mask h > 0 (a training step's ReLU gradient)."""
    bias = tf.constant(np.ones(w_shape[1], np.float32))
    w2 = tf.constant(np.ones((w_shape[1], 4), np.float32))

    def fn(x: tf.Tensor, w: tf.Tensor) -> Any:
        product = tf.matmul(x, w)
        h = act(product + bias)
        mask = tf.cast(h > 0, tf.float32)
        if mask_matmul:
            mask = tf.matmul(mask, w2)
        if mask_reads_product:
            mask = mask * product
        return (h, mask) if h_read_outside else mask

    return graph_of(fn, spec(None, w_shape[0]), spec(*w_shape))


@pytest.mark.parametrize(
    ("act", "w_shape", "options", "kept"),
    [
        (tf.nn.relu, (128, 256), {}, True),  # exactly LIBRARY_GEMM_ELEMENTS
        (tf.tanh, (128, 256), {}, True),
        (tf.nn.relu, (151, 217), {}, False),  # one element fewer
        (tf.nn.relu, (None, 32768), {}, False),  # an unknown size
        (tf.exp, (128, 256), {}, False),  # not an activation TensorFlow fuses
        (tf.tanh, (128, 256), {"gpu": True}, False),  # not fused on a GPU
        (tf.nn.relu, (128, 256), {"gpu": True}, True),
        (tf.nn.relu, (128, 256), {"h_read_outside": False}, False),  # not written out
        (tf.nn.relu, (128, 256), {"mask_matmul": True}, False),  # a kernel of two matmuls
        # the product, read by the mask alone, would be written out only for the merge
        (tf.nn.relu, (128, 256), {"mask_reads_product": True}, False),
    ],
)
def test_keeps_a_large_matmul_and_its_epilogue_one_library_call(
    act: Callable[[tf.Tensor], tf.Tensor],
    w_shape: tuple[int | None, int],
    options: dict[str, bool],
    kept: bool,
) -> None:
    assert 128 * 256 == LIBRARY_GEMM_ELEMENTS == 151 * 217 + 1
    gpu = options.pop("gpu", False)
    graph = _dense_and_mask(act, w_shape, **options)
    ctx = Context(graph, gpu=gpu)
    (activation,) = ctx.consumers[graph.node("add").output(0)]
    library = {"MatMul", "add", activation}
    mask = {"Greater", "Cast"} | {n for n in ("MatMul_1", "mul") if n in graph.nodes}
    for a, b in ((library, mask), (mask, library)):  # either side may be the matmul's
        decision = keeps_library_call(ctx, a, b, a | b)
        assert bool(decision) is not kept, (a, b, decision)
        assert decision.reason.startswith(LIBRARY) is kept


def test_a_group_of_two_matmuls_is_not_kept_as_a_library_call() -> None:
    w1, w2 = (tf.constant(np.ones((256, 256), np.float32)) for _ in range(2))
    bias = tf.constant(np.ones(256, np.float32))

    def fn(x: tf.Tensor) -> Any:
        h = tf.nn.relu(tf.matmul(tf.nn.relu(tf.matmul(x, w1) + bias), w2) + bias)
        return h, tf.cast(h > 0, tf.float32)

    ctx = Context(graph_of(fn, spec(None, 256)))
    layers = {"MatMul", "add", "Relu", "MatMul_1", "add_1", "Relu_1"}
    assert keeps_library_call(ctx, layers, {"Greater", "Cast"}, layers | {"Greater", "Cast"})
    last = {"MatMul_1", "add_1", "Relu_1"}  # the second layer alone is one library call
    assert not keeps_library_call(ctx, last, {"Greater", "Cast"}, last | {"Greater", "Cast"})


def test_a_merge_keeps_the_library_call_before_looking_for_a_layout() -> None:
    graph = _dense_and_mask(tf.nn.relu, (128, 256))
    decision = merge(graph, ["MatMul", "add", "Relu"], ["Greater", "Cast"])
    assert not decision
    assert decision.reason == (
        f"{LIBRARY}: the result read here is written out for its other readers anyway"
    )
    # with a smaller right operand, the same merge is a tile and its consumers
    graph = _dense_and_mask(tf.nn.relu, (151, 217))
    assert merge(graph, ["MatMul", "add", "Relu"], ["Greater", "Cast"])
