"""count_launches: measured kernels per step for TF, tf_stitch and XLA:CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

import tf_stitch


def _ln_gelu(x: tf.Tensor) -> tf.Tensor:
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.math.squared_difference(x, m), -1, keepdims=True)
    return tf.nn.gelu((x - m) * tf.math.rsqrt(v + 1e-5), approximate=False)


def test_layer_norm_gelu_is_one_kernel_against_many() -> None:
    x = tf.random.normal([64, 768])
    report = tf_stitch.count_launches(_ln_gelu, x)
    assert report.tf_stitch == 1
    assert report.tf_stitch_detail.by_type == {"StitchedKernel": 1}
    # TF runs one kernel per op: 2 Mean, Sub, SquaredDifference, AddV2, Rsqrt, Mul and GELU's
    # Neg, Mul, Erfc, Mul, Mul (the exact number depends on Grappler; it is never one).
    assert report.tf >= 10
    assert report.xla_cpu is not None and report.xla_cpu > report.tf_stitch
    table = str(report)
    assert "tf_stitch" in table and "XLA:CPU" in table and "TensorFlow" in table


def test_kernels_are_counted_by_the_dtypes_they_store() -> None:
    """Keras' mixed-precision pattern: a float16 GELU around a float32 layer norm and a float64
    softmax: each kernel is counted under the float dtypes it reads and writes; integer
    arithmetic under its integer dtypes."""

    def fn(x: tf.Tensor, d: tf.Tensor, i: tf.Tensor) -> tuple[tf.Tensor, ...]:
        h = tf.nn.gelu(tf.cast(x, tf.float16) * 2)
        y = tf.cast(_ln_gelu(tf.cast(h, tf.float32)), tf.float16) + h
        return y, tf.nn.softmax(d * 3), tf.bitwise.left_shift(i, 2) + i * 3

    ids = tf.random.uniform([8, 32], maxval=1000, dtype=tf.int64)
    report = tf_stitch.count_launches(
        fn, tf.random.normal([8, 64]), tf.random.normal([8, 32], dtype=tf.float64), ids
    )
    assert (
        sum(report.stitched_by_dtype.values()) == report.tf_stitch_detail.by_type["StitchedKernel"]
    )
    assert report.stitched_by_dtype.get("float64") == 1, report.stitched_by_dtype
    assert report.stitched_by_dtype.get("int64") == 1, report.stitched_by_dtype
    assert any("float16" in d for d in report.stitched_by_dtype), report.stitched_by_dtype
    assert "tf_stitch's kernels by dtype: " in str(report)


def test_accepts_optimized_functions_and_keras_models() -> None:
    import keras

    keras.utils.set_random_seed(0)
    inp = keras.Input((16,))
    model = keras.Model(inp, keras.layers.LayerNormalization()(inp * 2.0))
    x = tf.random.normal([4, 16])
    from_model = tf_stitch.count_launches(model, x)
    optimized = tf_stitch.optimize(model)
    from_optimized = tf_stitch.count_launches(optimized, x)
    assert from_model.tf_stitch == from_optimized.tf_stitch == 1
    assert from_model.tf > 1


def test_tensorflows_run_gets_the_same_gpu_model() -> None:
    """TensorFlow's traced ops mapped to GPU kernels like tf_stitch's (Softmax: three kernels),
    so that the GPU counts compare like with like."""
    x = tf.random.normal([16, 128])
    report = tf_stitch.count_launches(lambda t: tf.nn.softmax(t * 2.0), x)
    detail = report.tf_gpu_detail
    assert detail is not None and report.tf_gpu == detail.total
    assert detail.by_type.get("Softmax") == 3 and report.tf_gpu >= report.tf
    assert report.tf_stitch_gpu == 1 < report.tf_gpu
    assert "TensorFlow on a GPU" in str(report)


def test_a_gpu_counts_the_graph_optimized_for_its_layout() -> None:
    """Between two float32 convolutions, a stitched kernel costs a GPU no transposes: the GPU
    count is of the graph optimized with NCHW convolutions, which gives the same answers."""
    w1 = tf.random.stateless_normal([3, 3, 4, 8], seed=[1, 2])
    w2 = tf.random.stateless_normal([3, 3, 8, 8], seed=[3, 4])

    @tf.function(input_signature=[tf.TensorSpec([1, 16, 16, 4])])
    def cnn(x: tf.Tensor) -> tf.Tensor:
        y = tf.nn.conv2d(x, w1, 1, "SAME")
        y = tf.nn.silu(y) * 0.5 + y
        return tf.reduce_mean(tf.nn.relu(tf.nn.conv2d(y, w2, 1, "SAME")), [1, 2])

    x = tf.random.stateless_normal([1, 16, 16, 4], seed=[5, 6])
    optimized = tf_stitch.optimize(cnn)
    report = tf_stitch.count_launches(optimized, x)
    gpu = report.gpu_optimized
    assert gpu is not None and gpu is not optimized
    assert {n.attrs.get("data_format") for n in gpu.graph if n.op == "Conv2D"} == {b"NCHW"}
    assert report.tf_stitch_gpu_detail is not None
    by_type = report.tf_stitch_gpu_detail.by_type
    assert "Transpose (layout optimizer)" not in by_type, by_type
    assert by_type.get("Transpose", 0) <= 1  # the image, into NCHW
    assert report.tf_stitch_gpu < report.tf_gpu
    tf.debugging.assert_near(gpu(x), cnn(x), rtol=1e-4, atol=1e-4)


def test_a_gpu_counts_the_plan_that_merges_independent_kernels() -> None:
    """On a CPU two large independent kernels stay apart (TensorFlow runs them side by side);
    a GPU's plan makes them one launch, and the GPU count is of that plan."""

    @tf.function(input_signature=[tf.TensorSpec([64, 1024])] * 2)
    def two(a: tf.Tensor, b: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return tf.nn.relu(a * 2.0 + 1.0), tf.sigmoid(b) * 3.0 - 1.0

    optimized = tf_stitch.optimize(two)
    assert len(optimized.kernels) == 2
    x = tf.random.stateless_normal([64, 1024], seed=[1, 2])
    report = tf_stitch.count_launches(optimized, x, x * 0.5)
    gpu = report.gpu_optimized
    assert gpu is not None and gpu is not optimized and len(gpu.kernels) == 1
    assert report.tf_stitch == 2 and report.tf_stitch_gpu == 1


_WITHOUT_ONEDNN = """
import pytest
import tensorflow as tf
import tf_stitch
from tf_stitch.fusion.host_cpu import onednn_enabled

assert not onednn_enabled()
w = tf.random.stateless_normal([3, 3, 4, 8], seed=[1, 2])

@tf.function(input_signature=[tf.TensorSpec([1, 16, 16, 4])])
def cnn(x):
    y = tf.nn.conv2d(x, w, 1, "SAME")
    return tf.reduce_mean(tf.nn.silu(y) * 0.5 + y, [1, 2])

x = tf.random.stateless_normal([1, 16, 16, 4], seed=[5, 6])
report = tf_stitch.count_launches(tf_stitch.optimize(cnn), x)
assert report.tf_stitch_gpu is None and report.gpu_optimized is None, report
assert report.tf_stitch >= 1 and report.tf_gpu > 0
assert any("oneDNN is off" in n for n in report.notes), report.notes
assert "n/a" in str(report)
try:
    tf_stitch.count_launches(tf_stitch.optimize(cnn, conv_layout="NCHW"), x)
except RuntimeError as e:
    assert "optimized for a GPU" in str(e) and "TF_ENABLE_ONEDNN_OPTS=1" in str(e), e
else:
    raise AssertionError("counted a graph this host cannot run")
print("ok")
"""


def test_without_onednn_the_gpu_plan_is_not_traced_and_says_why(tmp_path: Path) -> None:
    """Where TensorFlow's CPU kernels run convolutions in NHWC only (oneDNN off: TensorFlow's
    default on AMD EPYCs), the graph planned for a GPU cannot run on the host: its count is n/a
    with the reason, never a crash, and a function optimized for a GPU is refused clearly."""
    script = tmp_path / "without_onednn.py"
    script.write_text(_WITHOUT_ONEDNN)
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    result = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-3000:]


def test_bad_arguments_are_clear_errors() -> None:
    with pytest.raises(TypeError, match="a function or a Keras model, not None"):
        tf_stitch.count_launches(None, tf.ones([2]))
    with pytest.raises(ValueError, match="steps must be a positive int, not 0"):
        tf_stitch.count_launches(tf.nn.relu, tf.ones([2]), steps=0)
