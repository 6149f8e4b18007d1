"""The FLOP counter against TensorFlow's own per-op FLOP statistics (`tf.compat.v1.profiler`,
`float_operation`), node for node, on models that are not part of the zoo's fixtures."""

from __future__ import annotations

from typing import Any

import keras
import pytest
import tensorflow as tf

from tf_stitch.profiler.analyses.flops import op_costs
from tf_stitch.profiler.trace.op_table import op_table


def _graph(model: Any, shape: list[int]) -> tf.Graph:
    fn = tf.function(lambda x: model(x, training=False))
    return fn.get_concrete_function(tf.TensorSpec(shape)).graph


def _tensorflow_flops(graph: tf.Graph) -> dict[str, int]:
    options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    profile = tf.compat.v1.profiler.profile(graph, options=options)
    return {c.name: c.float_ops for c in profile.children}


def _mixed_model() -> Any:
    keras.utils.set_random_seed(1)
    inp = keras.Input((20, 20, 3))
    x = keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu")(inp)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.AveragePooling2D(3, strides=1, padding="same")(x)
    x = keras.layers.Conv2DTranspose(4, 2, strides=2)(x)
    x = keras.layers.DepthwiseConv2D(5, depth_multiplier=2)(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inp, keras.layers.Dense(7, activation="sigmoid")(x))


@pytest.mark.parametrize(
    ("build", "shape"),
    [
        (
            lambda: keras.applications.MobileNetV2(
                weights=None, input_shape=(96, 96, 3), alpha=0.35
            ),
            [1, 96, 96, 3],
        ),
        (_mixed_model, [2, 20, 20, 3]),
    ],
    ids=["mobilenet_v2_0.35_96", "mixed"],
)
def test_every_op_tensorflow_counts_has_the_same_flops(build: Any, shape: list[int]) -> None:
    graph = _graph(build(), shape)
    theirs = _tensorflow_flops(graph)
    ours = op_costs(op_table(graph)).set_index("name").flops
    compared = {n for n in theirs if n in ours.index}
    assert len(compared) > 10
    differ = {n: (ours[n], theirs[n]) for n in compared if ours[n] != theirs[n]}
    assert differ == {}
    kinds = set(op_table(graph).set_index("name").op[sorted(compared)])
    assert {"Conv2D", "DepthwiseConv2dNative", "MatMul"} <= kinds or {"Conv2D"} <= kinds
