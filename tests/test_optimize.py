"""The public optimizer API: every accepted form, the calling convention, bad input, fallbacks."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_close, random_inputs

import tf_stitch

SIG = [tf.TensorSpec([None, 32], tf.float32)]


@tf.function(input_signature=SIG)
def ln_relu(x: tf.Tensor) -> tf.Tensor:
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.square(x - m), -1, keepdims=True)
    return tf.nn.relu((x - m) * tf.math.rsqrt(v + 1e-5))


def _graph_def() -> tf.compat.v1.GraphDef:
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 32], name="x")
        y = tf.nn.softmax(x * 2.0)
        tf.identity(tf.exp(y) + 1.0, name="out")
    return g.as_graph_def()


def _run(graph_def: tf.compat.v1.GraphDef, x: np.ndarray, output: str = "out:0") -> np.ndarray:
    with tf.Graph().as_default() as g:
        tf.graph_util.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=g) as sess:
            return sess.run(output, {"x:0": x})


def _kernels(graph_def: tf.compat.v1.GraphDef) -> int:
    return sum(1 for n in graph_def.node if n.op == "StitchedKernel")


def test_graph_def_in_graph_def_out_keeps_output_names() -> None:
    gd = _graph_def()
    out = tf_stitch.optimize(gd, outputs=["out"])
    assert isinstance(out, tf.compat.v1.GraphDef)
    assert _kernels(out) == 1
    x = np.random.default_rng(0).standard_normal([5, 32]).astype(np.float32)
    np.testing.assert_allclose(_run(out, x), _run(gd, x), rtol=1e-5, atol=1e-6)


def test_serialized_graph_def_and_default_outputs() -> None:
    out = tf_stitch.optimize(_graph_def().SerializeToString())
    assert any(n.name == "out" for n in out.node)
    assert _kernels(out) == 1


def test_concrete_function_gives_a_callable_with_the_same_signature() -> None:
    fn = tf_stitch.optimize(ln_relu.get_concrete_function())
    x = random_inputs(SIG, batch=4)[0]
    assert_close(ln_relu(x), fn(x))
    assert_close(ln_relu(x), fn(x=x))


def test_structured_outputs_and_keyword_arguments() -> None:
    @tf.function(input_signature=[tf.TensorSpec([None, 8]), tf.TensorSpec([8])])
    def f(a: tf.Tensor, b: tf.Tensor) -> dict[str, tf.Tensor]:
        s = tf.nn.softmax(a + b)
        return {"probs": s, "log": tf.math.log(s + 1e-6)}

    fn = tf_stitch.optimize(f)
    a, b = random_inputs(f.input_signature, batch=3)
    got = fn(a, b=b)
    assert set(got) == {"probs", "log"}
    assert_close(f(a, b), got)


def test_keras_model_with_and_without_signature() -> None:
    import keras

    keras.utils.set_random_seed(0)
    inp = keras.Input((32,))
    model = keras.Model(inp, keras.layers.LayerNormalization()(keras.layers.Dense(32)(inp)))
    x = random_inputs(SIG, batch=2)[0]
    for fn in (tf_stitch.optimize(model), tf_stitch.optimize(model, input_signature=SIG)):
        assert_close(model(x, training=False), fn(x), rtol=1e-4, atol=1e-5)
        assert len(fn.kernels) == 1


def test_batch_dimension_varies_between_calls() -> None:
    fn = tf_stitch.optimize(ln_relu)
    for batch in (1, 7, 2, 64, 0):
        x = random_inputs(SIG, batch=batch, seed=batch)[0]
        assert_close(ln_relu(x), fn(x))


def test_function_decorator_optimizes_each_signature_once() -> None:
    calls = []

    @tf_stitch.function
    def f(x: tf.Tensor) -> tf.Tensor:
        calls.append(1)
        return tf.tanh(x) * 2.0 + 1.0

    a = tf.ones([2, 3])
    assert_close(tf.tanh(a) * 2.0 + 1.0, f(a))
    f(a * 3.0)
    f(tf.ones([4, 5]))
    assert len(f._cache) == 2  # two shapes traced, each optimized once
    assert len(calls) == 2


def test_explain_lists_kernels_and_reasons() -> None:
    text = tf_stitch.explain(ln_relu)
    assert "kernel" in text and "row(split_dim=1" in text
    assert "merge" in text and "allow(" in text
    refused = tf_stitch.explain(
        tf.function(
            lambda x, w: tf.exp(tf.matmul(tf.exp(x), w)),
            input_signature=[SIG[0], tf.TensorSpec([32, 32])],
        )
    )
    assert "operand Exp:0 is computed in the group" in refused


@pytest.mark.parametrize(
    ("bad", "error", "match"),
    [
        (42, TypeError, "expects"),
        ("model.pb", TypeError, "expects"),
        (b"\x08\x01garbage\xff\xff", ValueError, "GraphDef"),
    ],
)
def test_bad_arguments_give_clear_errors(bad: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        tf_stitch.optimize(bad)


def test_truncated_graph_def_is_a_value_error() -> None:
    data = _graph_def().SerializeToString()
    with pytest.raises(ValueError, match="GraphDef"):
        tf_stitch.optimize(data[: len(data) // 2])


def test_unknown_output_name() -> None:
    with pytest.raises(ValueError, match="unknown output 'nope'"):
        tf_stitch.optimize(_graph_def(), outputs=["nope"])


def test_tf_function_without_signature_needs_one() -> None:
    with pytest.raises(TypeError, match="input_signature"):
        tf_stitch.optimize(tf.function(lambda x: x * 2.0))


def test_broken_compiler_keeps_the_original_ops(
    kernel_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken-cxx"
    broken.write_text("#!/bin/sh\necho 'cc1plus: fatal error: out of cheese' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv("TF_STITCH_CXX", str(broken))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn = tf_stitch.optimize(ln_relu)
    messages = [str(w.message) for w in caught]
    assert any("stays as TensorFlow ops" in m and "out of cheese" in m for m in messages), messages
    assert _kernels(fn.graph_def) == 0
    x = random_inputs(SIG, batch=3)[0]
    assert_close(ln_relu(x), fn(x))


def test_unknown_ops_are_left_untouched() -> None:
    @tf.function(input_signature=[tf.TensorSpec([None, 4, 4, 3])])
    def f(x: tf.Tensor) -> tf.Tensor:
        return tf.nn.relu(tf.image.flip_left_right(x) * 2.0 + 1.0)

    fn = tf_stitch.optimize(f)
    assert any(n.op == "ReverseV2" for n in fn.graph_def.node)
    x = random_inputs(f.input_signature, batch=2)[0]
    assert_close(f(x), fn(x))


def test_a_fed_intermediate_tensor_is_respected() -> None:
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 32], name="x")
        mid = tf.exp(x * 0.5, name="mid")
        tf.identity(tf.nn.softmax(mid + 1.0) * 2.0, name="out")
    gd = g.as_graph_def()
    out = tf_stitch.optimize(gd, inputs=["x:0", "mid:0"], outputs=["out"])
    assert any(n.name == "mid" for n in out.node)  # its producer must stay: it may be fed
    feed = np.random.default_rng(1).standard_normal([3, 32]).astype(np.float32)
    for graph_def in (gd, out):
        with tf.Graph().as_default() as g2:
            tf.graph_util.import_graph_def(graph_def, name="")
            with tf.compat.v1.Session(graph=g2) as sess:
                got = sess.run("out:0", {"x:0": feed * 0.0, "mid:0": feed})
        np.testing.assert_allclose(
            got, tf.nn.softmax(feed + 1.0).numpy() * 2.0, rtol=1e-5, atol=1e-6
        )


def test_unknown_sizes_that_turn_out_to_broadcast_fail_loudly() -> None:
    """Two inputs with an unknown batch are assumed equal; if one is 1 at run time (a broadcast
    TensorFlow would do), the kernel refuses with a clear error instead of computing garbage."""
    sig = [tf.TensorSpec([None, 8]), tf.TensorSpec([None, 8])]
    f = tf.function(lambda a, b: tf.exp(a + b) * 2.0, input_signature=sig)
    fn = tf_stitch.optimize(f)
    a, b = tf.ones([4, 8]), tf.ones([4, 8])
    assert_close(f(a, b), fn(a, b))
    with pytest.raises(tf.errors.InvalidArgumentError, match="stitched"):
        fn(a, tf.ones([1, 8]))


def test_a_kernel_that_does_not_load_keeps_the_original_ops(
    kernel_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 'compiler' that exits 0 but writes garbage: the library fails to load at optimize time,
    so the group stays as TensorFlow ops with a warning (never a graph that fails later)."""
    fake = tmp_path / "fake-cxx"
    fake.write_text(
        '#!/bin/sh\nif [ "$1" = --version ]; then echo fake 1.0; exit 0; fi\n'
        'while [ $# -gt 0 ]; do if [ "$1" = -o ]; then echo garbage > "$2"; fi; shift; done\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("TF_STITCH_CXX", str(fake))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn = tf_stitch.optimize(ln_relu)
    assert any("does not load" in str(w.message) for w in caught)
    assert _kernels(fn.graph_def) == 0
    x = random_inputs(SIG, batch=2)[0]
    assert_close(ln_relu(x), fn(x))


def test_float64_is_stitched_and_computed_in_double() -> None:
    """(the 16-bit floats: tests/test_half_numerics.py; every dtype of every numerics case:
    tests/test_dtype_numerics.py)"""

    @tf.function(input_signature=[tf.TensorSpec([None, 16], tf.float64)])
    def f(x: tf.Tensor) -> tf.Tensor:
        return tf.nn.softmax(tf.nn.relu(x) * 2.0) + tf.reduce_mean(x, -1, keepdims=True)

    fn = tf_stitch.optimize(f)
    assert _kernels(fn.graph_def) == 1
    assert "double" in fn.kernels[0].source
    x = tf.cast(random_inputs([tf.TensorSpec([None, 16])], batch=3)[0], tf.float64)
    np.testing.assert_allclose(f(x).numpy(), fn(x).numpy(), rtol=1e-12, atol=1e-12)


def test_multi_input_keras_model_is_called_like_the_model() -> None:
    import keras

    keras.utils.set_random_seed(0)
    a, b = keras.Input((8,)), keras.Input((8,))
    model = keras.Model([a, b], keras.layers.LayerNormalization()(a * b + a))
    optimized = tf_stitch.optimize(model)
    xa, xb = random_inputs([tf.TensorSpec([None, 8])] * 2, batch=3)
    assert_close(model([xa, xb], training=False), optimized([xa, xb]), rtol=1e-4, atol=1e-5)
    report = tf_stitch.count_launches(model, xa, xb)
    assert report.tf_stitch == 1
