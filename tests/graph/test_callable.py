"""A GraphDef called like the original function: flat calls, structured calls, bad calls."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close, random_inputs
from graph_helpers import spec, v1_graph_def

from tf_stitch.graph.callable import GraphFunction, function_from_graph_def
from tf_stitch.graph.frontends import load
from tf_stitch.graph.io import graph_to_graph_def


def fn(a: tf.Tensor, pair: tuple[tf.Tensor, tf.Tensor], *, scale: tf.Tensor) -> dict[str, Any]:
    return {"sum": a + pair[0] * scale, "diff": pair[1] - a}


SIG = (spec(2), (spec(2), spec(2)))


def structured() -> GraphFunction:
    cf = tf.function(fn).get_concrete_function(*SIG, scale=spec(None))
    fe = load(cf)
    g = fe.graph
    specs = [tf.TensorSpec(g.info(r).shape, g.info(r).dtype) for r in g.inputs]
    flat = function_from_graph_def(
        graph_to_graph_def(g), [str(r) for r in g.inputs], [str(r) for r in g.outputs], specs
    )
    names = [p.name for p in cf.function_type.parameters.values()]
    return GraphFunction(flat, fe.structured_inputs, fe.structured_outputs, names)


def test_function_from_graph_def_runs_the_flat_graph() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        y = tf.compat.v1.placeholder(tf.float32, [3], name="y")
        tf.multiply(x, y, name="m")
        tf.subtract(x, y, name="s")

    f = function_from_graph_def(
        v1_graph_def(build), ["x:0", "y:0"], ["s:0", "m:0"], [spec(None, 3), spec(3)]
    )
    x, y = random_inputs([spec(4, 3), spec(3)])
    assert_close([x - y, x * y], f(x, y))
    x5 = random_inputs([spec(5, 3)])[0]  # the unknown batch size stays unknown
    assert_close([x5 - y, x5 * y], f(x5, y))


def test_flat_function_rejects_wrong_shapes() -> None:
    def build() -> None:
        tf.negative(tf.compat.v1.placeholder(tf.float32, [3], name="x"), name="n")

    f = function_from_graph_def(v1_graph_def(build), ["x:0"], ["n:0"], [spec(3)])
    gf = GraphFunction(f, None, None, input_specs=[spec(3)])
    assert_close([-tf.ones([3])], gf(tf.ones([3])))
    with pytest.raises(ValueError, match="input 0 has shape"):
        gf(tf.zeros([4]))


def test_structured_call_matches_the_original() -> None:
    gf = structured()
    a, p0, p1 = random_inputs([spec(2)] * 3)
    scale = tf.constant([2.0, 3.0])
    expected = fn(a, (p0, p1), scale=scale)
    got = gf(a, (p0, p1), scale=scale)
    assert set(got) == {"sum", "diff"}
    assert_close(expected, got)


def test_structured_call_converts_numpy_values() -> None:
    gf = structured()
    ones, zeros = np.ones(2), np.zeros(2)
    got = gf(np.float64([1.0, 2.0]), (ones, zeros), scale=np.float64([2.0, 2.0]))
    assert_close({"sum": np.float32([3, 4]), "diff": np.float32([-1, -2])}, got)


def test_structured_call_accepts_python_lists_like_the_original() -> None:
    gf = structured()
    got = gf([1.0, 2.0], ([1.0, 1.0], [0.0, 0.0]), scale=[2.0, 2.0])
    assert_close(
        fn(tf.constant([1.0, 2.0]), (tf.ones(2), tf.zeros(2)), scale=tf.constant(2.0)), got
    )


def test_tensor_arguments_may_be_passed_by_keyword() -> None:
    a, p0, p1 = random_inputs([spec(2)] * 3)
    scale = tf.constant([2.0, 3.0])
    assert_close(fn(a, (p0, p1), scale=scale), structured()(pair=(p0, p1), a=a, scale=scale))


Z = tf.zeros(2)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((Z, (Z, Z), Z), {"scale": Z}, "expected at most 2 positional arguments, got 3"),
        ((Z,), {"scale": Z}, "missing tensor argument pair"),
        ((Z, Z), {"scale": Z}, "do not match the function's signature"),
        ((Z, (Z, Z, Z)), {"scale": Z}, "do not match the function's signature"),
        ((Z, (Z, Z)), {}, "missing tensor argument 'scale'"),
        ((Z, (Z, Z)), {"scale": Z, "x": 1}, r"unexpected keyword arguments \['x'\]"),
    ],
)
def test_structured_call_rejects_mismatched_arguments(
    args: tuple, kwargs: dict, message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        structured()(*args, **kwargs)


def test_without_structure_the_call_is_flat_and_positional() -> None:
    gf = GraphFunction(lambda *xs: [x + 1 for x in xs], None, None)
    assert gf(1, 2) == [2, 3]
    with pytest.raises(TypeError, match="positional tensors only"):
        gf(1, y=2)


_FRESH = """
import sys
import tensorflow as tf
from tf_stitch.graph.callable import function_from_graph_def
gd = tf.compat.v1.GraphDef.FromString(open(sys.argv[1], "rb").read())
fn = function_from_graph_def(gd, ["x:0"], [sys.argv[2]], [tf.TensorSpec([None, 3])])
print(float(tf.reduce_sum(fn(tf.ones([2, 3]))[0])))
"""


def _loop_graph_def() -> tuple[tf.compat.v1.GraphDef, str, tf.Tensor]:
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    @tf.function(input_signature=[tf.TensorSpec([None, 3], name="x")])
    def f(x: tf.Tensor) -> tf.Tensor:
        return tf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, h * 1.5 + x), (0, x))[1]

    frozen = convert_variables_to_constants_v2(f.get_concrete_function(), lower_control_flow=False)
    return frozen.graph.as_graph_def(), frozen.outputs[0].name, f(tf.ones([2, 3]))


def test_library_functions_are_defined_in_a_process_that_never_made_them(tmp_path: Any) -> None:
    import subprocess
    import sys

    gd, output, expected = _loop_graph_def()
    path = tmp_path / "loop.pb"
    path.write_bytes(gd.SerializeToString())
    done = subprocess.run(
        [sys.executable, "-c", _FRESH, str(path), output],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.split()[-1]) == pytest.approx(float(tf.reduce_sum(expected)))


def test_a_different_function_under_a_defined_name_is_an_error() -> None:
    gd, output, _ = _loop_graph_def()  # its functions are defined in this process now
    body = next(f for f in gd.library.function if "body" in f.signature.name)
    body.node_def.add(name="extra", op="NoOp")
    with pytest.raises(ValueError, match="differs from the function of that name"):
        function_from_graph_def(gd, ["x:0"], [output], [tf.TensorSpec([None, 3])])
