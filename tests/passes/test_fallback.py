"""fallback: every StitchedKernel's group as a function of the kernel's inputs. Replacing each
kernel by a call of its fallback must give the original graph's values."""

from __future__ import annotations

import pytest
import tensorflow as tf
from graph_helpers import assert_same_values, graph_of, spec
from tensorflow.core.framework import function_pb2

from tf_stitch.graph.ir import Graph, Node, TensorRef
from tf_stitch.optimize import optimize_graph
from tf_stitch.passes.fallback import add_functions, fallback_function


def model(x: tf.Tensor, b: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    m = tf.reduce_max(x, -1, keepdims=True)
    e = tf.exp(x - m)
    sm = e / tf.reduce_sum(e, -1, keepdims=True)
    h = tf.nn.relu(tf.matmul(sm, tf.transpose(x)) + 0.5) * b[0]
    return sm * 3.0, tf.reduce_mean(tf.tanh(h) + 1.0, axis=0)


def calls_instead_of_kernels(graph: Graph) -> Graph:
    """`graph` with each StitchedKernel replaced by a call of its fallback function (a node
    whose op is the function's name), so that only the fallbacks compute."""
    out = graph.copy()
    for node in [n for n in out if n.op == "StitchedKernel"]:
        (func,) = node.attrs["fallback"].items
        out.nodes[node.name] = Node(
            node.name,
            func.name,
            list(node.inputs),
            {},
            list(node.outputs),
            list(node.control_inputs),
        )
    return out


def test_fallbacks_compute_what_the_kernels_replace() -> None:
    g = graph_of(model, spec(None, 6), spec(6))
    optimized, _ = optimize_graph(g, None, fallback=True)
    kernels = [n for n in optimized if n.op == "StitchedKernel"]
    assert len(kernels) >= 2
    library = function_pb2.FunctionDefLibrary()
    library.ParseFromString(optimized.library)
    names = {f.signature.name for f in library.function}
    for k in kernels:
        (func,) = k.attrs["fallback"].items
        assert func.name in names and func.name.startswith("tf_stitch_fallback_")
    replaced = calls_instead_of_kernels(optimized)
    assert not any(n.op == "StitchedKernel" for n in replaced)
    assert_same_values(g, replaced, batch=4)


def test_without_the_option_no_fallback() -> None:
    optimized, _ = optimize_graph(graph_of(model, spec(None, 6), spec(6)), None)
    assert all("fallback" not in n.attrs for n in optimized if n.op == "StitchedKernel")


def test_names_differ_for_different_bodies_and_functions_are_added_once() -> None:
    g = graph_of(lambda x: (tf.exp(x) + 1.0, tf.exp(x) * 2.0), spec(None, 3))
    x = g.inputs[0]
    add = next(n for n in g if n.op == "AddV2")
    mul = next(n for n in g if n.op == "Mul")
    f_add = fallback_function(g, [x], [add.output(0)], "k")
    f_mul = fallback_function(g, [x], [mul.output(0)], "k")
    assert f_add.signature.name != f_mul.signature.name
    assert f_add.signature.name == fallback_function(g, [x], [add.output(0)], "k").signature.name
    lib = function_pb2.FunctionDefLibrary()
    lib.ParseFromString(add_functions(b"", [f_add, f_mul, f_add]))
    assert len(lib.function) == 2


def test_an_output_that_depends_on_another_feed_is_refused() -> None:
    g = graph_of(lambda x, y: x * y + 1.0, spec(None, 3), spec(None, 3))
    add = next(n for n in g if n.op == "AddV2")
    with pytest.raises(ValueError, match="depend on the feed"):
        fallback_function(g, [g.inputs[0]], [add.output(0)], "k")
    assert TensorRef.parse(str(add.output(0))) == add.output(0)
