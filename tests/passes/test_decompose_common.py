"""passes/decompose_common.py: which composites a decompose-* pass may expand, through the guard."""

from __future__ import annotations

import tensorflow as tf
from graph_helpers import graph_of, spec

from tf_stitch.graph.ir import Graph, TensorRef
from tf_stitch.passes.decompose_common import channels_first, decompose_each, replace_with


def _softmaxes() -> Graph:
    def fn(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        return tf.nn.softmax(x, name="p"), tf.nn.softmax(x * 2.0, name="q"), x

    return graph_of(fn, spec(2, 5))


def _expanded(graph: Graph) -> set[str]:
    done: set[str] = set()

    def rewrite(g: Graph, node: object) -> None:
        done.add(node.name)  # type: ignore[attr-defined]

    decompose_each(graph, lambda n: n.op == "Softmax", rewrite)
    return done


def test_every_plain_composite_is_expanded() -> None:
    assert _expanded(_softmaxes()) == {"p", "q"}


def test_a_fed_an_ordered_or_a_waiting_composite_is_left() -> None:
    fed = _softmaxes()
    fed.inputs = [*fed.inputs, TensorRef("p")]
    assert _expanded(fed) == {"q"}
    waits = _softmaxes()
    waits.node("q").control_inputs = ["x"]
    assert _expanded(waits) == {"p"}
    waited_for = _softmaxes()
    waited_for.node("x").control_inputs = ["p"]
    assert _expanded(waited_for) == {"q"}


def test_a_composite_of_another_dtype_is_left_unless_accepted() -> None:
    def fn(x: tf.Tensor) -> tf.Tensor:
        return tf.nn.softmax(x, name="h")

    g = graph_of(fn, spec(2, 5, dtype=tf.float16))
    done: list[str] = []
    decompose_each(g, lambda n: n.op == "Softmax", lambda _, n: done.append(n.name))
    assert done == []
    decompose_each(g, lambda n: n.op == "Softmax", lambda _, n: done.append(n.name), ("float16",))
    assert done == ["h"]


def test_replace_with_keeps_the_name_and_puts_it_after_its_producers() -> None:
    g = _softmaxes()
    node = g.node("p")
    replace_with(g, node, lambda name: g.add(node.__class__(name, "Identity", node.inputs[:1])))
    assert g.node("p").op == "Identity" and list(g.nodes)[-1] == "p"


def test_channels_first_reads_the_data_format() -> None:
    g = graph_of(lambda x: tf.nn.softmax(x), spec(2, 5))
    node = next(iter(g))
    assert not channels_first(node)
    node.attrs["data_format"] = b"NCHW"
    assert channels_first(node)
