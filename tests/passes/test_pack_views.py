"""pack-views: transposes and reverses of stacked steps become one Pack."""

from __future__ import annotations

import tensorflow as tf
from graph_helpers import assert_same_values, ops, run_pass, v1_graph

from tf_stitch.passes.pack_views import pack_views


def _steps() -> list[tf.Tensor]:
    x = tf.compat.v1.placeholder(tf.float32, [None, 5], name="x")
    return [tf.tanh(x * float(i)) for i in range(4)]


def test_a_transposed_reversed_stack_is_one_pack() -> None:
    def build() -> None:
        stacked = tf.transpose(tf.stack(_steps()), [1, 0, 2])  # [B, 4, 5]
        tf.identity(tf.reverse(stacked, [1]), name="out")

    g = v1_graph(build)
    out = run_pass(pack_views, g)
    assert ops(out)["Pack"] == 1
    assert not ops(out)["Transpose"] and not ops(out)["ReverseV2"]
    (pack,) = [n for n in out if n.op == "Pack"]
    assert pack.attrs["axis"] == 1
    assert_same_values(g, out)


def test_transposes_that_reorder_other_axes_or_shared_packs_stay() -> None:
    def build() -> None:
        stacked = tf.stack(_steps())  # [4, B, 5]
        tf.identity(tf.transpose(stacked, [2, 0, 1]), name="out")  # moves the other axes too
        shared = tf.stack(_steps(), axis=1)
        tf.identity(tf.transpose(shared, [1, 0, 2]) + 1.0, name="out2")
        tf.identity(shared * 2.0, name="out3")  # the Pack is read twice
        tf.identity(tf.reverse(tf.stack(_steps()), [2]), name="out4")  # not the packed axis

    g = v1_graph(build)
    out = run_pass(pack_views, g)
    assert ops(out)["Transpose"] == 2 and ops(out)["ReverseV2"] == 1
    assert_same_values(g, out)
