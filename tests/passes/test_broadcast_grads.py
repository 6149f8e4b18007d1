"""broadcast-grads: a broadcasting op's gradient sums over constant axes where the graph proves
the unknown sizes of its operands equal, and keeps TensorFlow's run-time axes where it cannot
(two inputs of unknown batch: either may be 1 and broadcast; the kernels that would read them
together refuse a size of 1 with an error, see fusion/symbolic_dims.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import tensorflow as tf
from conftest import assert_close
from graph_helpers import ops, run_pass

import tf_stitch
from tf_stitch.graph.frontends import load
from tf_stitch.passes.broadcast_grads import broadcast_grads
from tf_stitch.passes.prune import prune

S = tf.TensorSpec
Loss = Callable[..., tf.Tensor]


def _gradients(loss: Loss) -> Callable[..., list[tf.Tensor]]:
    def fn(*xs: tf.Tensor) -> list[tf.Tensor]:
        with tf.GradientTape() as tape:
            for x in xs:
                tape.watch(x)
            y = loss(*xs)
        return tape.gradient(y, list(xs))

    return fn


def _residual(x: tf.Tensor) -> tf.Tensor:
    h = tf.tanh(x) * x + x  # operands of one batch, derived elementwise from x
    return tf.reduce_sum(h * h)


def _row_scale(x: tf.Tensor) -> tf.Tensor:
    s = tf.reduce_sum(x, axis=1, keepdims=True)  # [batch, 1]: its batch is x's
    return tf.reduce_sum(tf.sin(x * s))


def _sequence(x: tf.Tensor) -> tf.Tensor:
    m = tf.reduce_mean(x, axis=1, keepdims=True)  # [batch, 1, 8] against [batch, time, 8]
    return tf.reduce_sum(tf.square(x - m))


def _two_inputs(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    return tf.reduce_sum(tf.tanh(x * y))  # y's batch may be 1 where x's is not


CASES = [
    ("residual", _residual, [S([None, 8])], 0),
    ("row_scale", _row_scale, [S([None, 8])], 0),
    ("sequence", _sequence, [S([None, None, 8])], 0),
    ("two_inputs", _two_inputs, [S([None, 8]), S([None, 8])], 1),
]


def _graph(loss: Loss, specs: list[S]):  # type: ignore[no-untyped-def]
    return load(tf.function(_gradients(loss)).get_concrete_function(*specs)).graph


@pytest.mark.parametrize(("name", "loss", "specs", "left"), CASES, ids=[c[0] for c in CASES])
def test_run_time_axes_become_constants_where_sizes_are_proven_equal(
    name: str, loss: Loss, specs: list[S], left: int
) -> None:
    graph = _graph(loss, specs)
    assert ops(graph)["BroadcastGradientArgs"] >= 1, name
    out = ops(run_pass(prune, run_pass(broadcast_grads, graph)))
    assert out["BroadcastGradientArgs"] == left, (name, out)


@pytest.mark.parametrize(("name", "loss", "specs", "left"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("batches", [(3, 3), (1, 1)])
@pytest.mark.usefixtures("kernel_cache")
def test_the_optimized_gradients_match_tensorflow(
    name: str, loss: Loss, specs: list[S], left: int, batches: tuple[int, int]
) -> None:
    f = tf.function(_gradients(loss), input_signature=specs)
    xs = [
        tf.random.normal([b, *(5 if d is None else d for d in s.shape[1:])], seed=i)
        for i, (b, s) in enumerate(zip(batches, specs, strict=False))
    ]
    assert_close(f(*xs), tf_stitch.optimize(f)(*xs), rtol=1e-5, atol=1e-5)
