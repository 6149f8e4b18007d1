"""Tests for counting TensorFlow op launches from real profiler traces."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.eager import context

from tf_stitch.launches.op_launches import (
    OpLaunches,
    count_ops_per_step,
    count_tf_launches,
    summarize_steps,
)
from tf_stitch.profiler.trace.op_events import NO_KERNEL_OPS, OpRun, op_type_of
from tf_stitch.profiler.trace.xplane import StepInterval, TraceEvent

# Layer norm + exact GELU, counted by hand from the traced graph: moments = Mean, StopGradient
# (no kernel), SquaredDifference, Mean; then AddV2 (eps), Rsqrt, Sub, Mul, Mul (gamma),
# AddV2 (beta); exact GELU = 0.5 * y * erfc(-y / sqrt(2)) = Neg, Mul, Erfc, Mul, Mul.
LN_GELU_OPS = {
    "AddV2": 2,
    "Erfc": 1,
    "Mean": 2,
    "Mul": 5,
    "Neg": 1,
    "Rsqrt": 1,
    "SquaredDifference": 1,
    "Sub": 1,
}


def ln_gelu(x, gamma, beta):
    mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
    y = (x - mean) * tf.math.rsqrt(var + 1e-5) * gamma + beta
    return tf.nn.gelu(y, approximate=False)


def matmul_bias_relu(x, w, b):
    return tf.nn.relu(tf.matmul(x, w) + b)


def tanh_loop_5(x):
    def body(i, y):
        return i + 1, tf.tanh(y) * 2.0

    return tf.while_loop(lambda i, y: i < 5, body, [tf.constant(0), x])[1]


def _ln_inputs() -> tuple[tf.Tensor, ...]:
    rng = np.random.default_rng(0)
    return tuple(tf.constant(rng.standard_normal(s), tf.float32) for s in ([64, 768], [768], [768]))


def _mbr_inputs() -> tuple[tf.Tensor, ...]:
    rng = np.random.default_rng(1)
    return tuple(
        tf.constant(rng.standard_normal(s), tf.float32) for s in ([64, 128], [128, 256], [256])
    )


def _kernel_ops(nodes) -> Counter[str]:
    return Counter(n for n in nodes if n not in NO_KERNEL_OPS)


def executed_graph_ops(fn, args) -> Counter[str]:
    """Non-excluded op types of the partition graph(s) TF executes (after Grappler and oneDNN).

    Must be the first call of `fn`: TF records function graphs when it instantiates them.
    """
    ctx = context.context()
    ctx.enable_run_metadata()
    try:
        ctx.export_run_metadata()  # drop graphs recorded earlier
        fn(*args)
        metadata = ctx.export_run_metadata()
    finally:
        ctx.disable_run_metadata()
    assert metadata.function_graphs, "the function was already instantiated"
    partitions = [p for g in metadata.function_graphs for p in g.partition_graphs]
    return sum((_kernel_ops(n.op for n in p.node) for p in partitions), Counter())


def _frozen_pruned(fn, args):
    """`fn` traced, frozen to a GraphDef, re-imported with wrap_function and pruned."""
    concrete = tf.function(fn).get_concrete_function(*args)
    graph_def = concrete.graph.as_graph_def()
    inputs = [t.name for t in concrete.inputs]
    outputs = [t.name for t in concrete.outputs]

    def _import():
        tf.compat.v1.import_graph_def(graph_def, name="")

    wrapped = tf.compat.v1.wrap_function(_import, [])
    g = wrapped.graph
    return wrapped.prune([g.as_graph_element(n) for n in inputs], g.as_graph_element(outputs[0]))


def test_layer_norm_gelu_matches_hand_count_and_executed_graph() -> None:
    args = _ln_inputs()
    traced = tf.function(ln_gelu).get_concrete_function(*args).graph
    assert _kernel_ops(op.type for op in traced.get_operations()) == LN_GELU_OPS
    f = tf.function(ln_gelu)
    assert executed_graph_ops(f, args) == LN_GELU_OPS
    result = count_tf_launches(f, args)
    assert result.per_step == result.min_per_step == result.max_per_step == 14
    assert result.by_type == LN_GELU_OPS
    assert result.consistent
    # a plain Python function is wrapped in tf.function and gives the same count
    assert count_tf_launches(ln_gelu, [a.numpy() for a in args], steps=2, warmup=1) == result


def test_matmul_bias_relu_matches_executed_graph() -> None:
    args = _mbr_inputs()
    f = tf.function(matmul_bias_relu)
    executed = executed_graph_ops(f, args)
    result = count_tf_launches(f, args)
    assert result.by_type == dict(executed)
    if "_MklNativeFusedMatMul" in executed:  # oneDNN remapper fuses all three ops
        assert result.per_step == 1
    else:
        assert result.per_step == 3
    assert result.consistent


def test_while_loop_counts_every_iteration() -> None:
    result = count_tf_launches(tanh_loop_5, (tf.ones([32, 32]),))
    # body: Tanh, Mul, AddV2 (i + 1), AddV2 (while_v2's iteration counter) x 5 trips;
    # condition: Less x 6 evaluations; control-flow primitives leave no op events
    assert result.by_type == {"AddV2": 10, "Less": 6, "Mul": 5, "Tanh": 5}
    assert result.per_step == 26


def test_pruned_frozen_graph_def() -> None:
    args = _ln_inputs()
    pruned = _frozen_pruned(ln_gelu, args)
    np.testing.assert_allclose(pruned(*args).numpy(), ln_gelu(*args).numpy(), atol=1e-5)
    pruned = _frozen_pruned(ln_gelu, args)  # fresh, so the first call below instantiates it
    assert executed_graph_ops(pruned, args) == LN_GELU_OPS
    result = count_tf_launches(pruned, args)
    assert result.by_type == LN_GELU_OPS
    assert result.per_step == 14


def test_eager_callable_counts_eager_ops() -> None:
    class Block:
        def __call__(self, x, w, b):
            return matmul_bias_relu(x, w, b)

    result = count_tf_launches(Block(), _mbr_inputs(), steps=2, warmup=1)
    assert result.by_type == {"AddV2": 1, "MatMul": 1, "Relu": 1}


def test_refuses_to_run_inside_active_profiler(tmp_path: Path) -> None:
    tf.profiler.experimental.start(str(tmp_path))
    try:
        with pytest.raises(RuntimeError, match="already active"):
            count_tf_launches(matmul_bias_relu, _mbr_inputs(), steps=1, warmup=0)
    finally:
        tf.profiler.experimental.stop()


def test_temporary_logdir_is_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    count_tf_launches(matmul_bias_relu, _mbr_inputs(), steps=1, warmup=1)
    assert list(tmp_path.iterdir()) == []


def _op(name: str, op_type: str, t: int) -> TraceEvent:
    return TraceEvent(f"{name}:{op_type}", op_type, "tf_Compute/1", t, 1)


def test_op_event_recognition() -> None:
    assert op_type_of(_op("n", "MyCustomOp", 0)) == "MyCustomOp"  # unknown types are kept
    assert op_type_of(TraceEvent("ExecutorState::Process", "", "l", 0, 1)) is None
    eager = TraceEvent("EagerExecute", "", "python", 0, 1, {"eager_op": "Relu", "is_func": 0})
    assert op_type_of(eager) == "Relu"
    call = TraceEvent("EagerExecute", "", "python", 0, 1, {"eager_op": "__f", "is_func": 1})
    assert op_type_of(call) is None


def test_inconsistent_steps_are_reported() -> None:
    steps = [StepInterval(0, 0, 100), StepInterval(1, 100, 200), StepInterval(2, 200, 300)]
    events = [
        _op("a", "MyCustomOp", 10),
        _op("r", "_Retval", 20),
        _op("b", "MyCustomOp", 110),
        _op("r", "_Retval", 120),
        _op("c", "MyCustomOp", 210),
        _op("d", "Relu", 220),
        _op("e", "Relu", 300),  # outside every step
    ]
    per_step = count_ops_per_step(events, steps)
    assert [c.total() for c in per_step] == [2, 2, 2]
    result = summarize_steps(per_step)
    assert result == OpLaunches(
        per_step=1,
        min_per_step=1,
        max_per_step=2,
        by_type={"MyCustomOp": 1},
        excluded_by_type={"_Retval": 1},
        runs={OpRun("a", "MyCustomOp"): 1},
    )
    assert not result.consistent
