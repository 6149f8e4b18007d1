"""bench/gpu_plan.py: the GPU plan of a CNN counted and checked in this process (oneDNN on,
see conftest.py), and a child process's answer read back, or its failure said."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf

from tf_stitch.bench.gpu_plan import GpuPlanCount, count_gpu_plan, count_in_child


def test_a_cnns_gpu_plan_is_counted_and_gives_the_originals_answers() -> None:
    w = tf.random.stateless_normal([3, 3, 4, 8], seed=[1, 2])

    def cnn(x: tf.Tensor) -> tf.Tensor:
        y = tf.nn.conv2d(x, w, 1, "SAME")
        return tf.reduce_mean(tf.nn.silu(y) * 0.5 + y, [1, 2])

    x = tf.random.stateless_normal([1, 16, 16, 4], seed=[5, 6])
    count = count_gpu_plan(cnn, [tf.TensorSpec([1, 16, 16, 4])], [x])
    assert count.outputs_match and count.max_abs_error < 1e-4
    # the convolution (cuDNN), the image's transpose into NCHW, one stitched epilogue + mean
    assert 2 <= count.kernels <= 4, count
    assert count.kernels == sum(count.by_type.values())


def test_a_childs_answer_is_read_from_its_last_marked_line(tmp_path: Path) -> None:
    child = tmp_path / "child.py"
    child.write_text(
        "import os\n"
        "from tf_stitch.bench.gpu_plan import GpuPlanCount, report\n"
        "print('noise')\n"
        "onednn = os.environ['TF_ENABLE_ONEDNN_OPTS']\n"
        "report(GpuPlanCount(7, {'Conv2D': 7}, 1e-7, True, [onednn]))\n"
    )
    got = count_in_child([str(child)], timeout_s=600)
    assert got == GpuPlanCount(7, {"Conv2D": 7}, 1e-7, True, ["1"])  # oneDNN on in the child


def test_a_child_that_gives_no_answer_is_a_clear_error(tmp_path: Path) -> None:
    child = tmp_path / "child.py"
    child.write_text("import sys\nprint('model not found', file=sys.stderr)\nsys.exit(3)\n")
    with pytest.raises(RuntimeError, match=r"exit 3\): model not found"):
        count_in_child([str(child)], timeout_s=600)
