"""A converted SavedModel served where tf_stitch's Python is not imported: the op library loaded
by its documented path in a fresh process, `tf-stitch saved-model-cli run`, and the hint the
SavedModel carries."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tf_stitch
from tests.convert.conftest import REPO
from tf_stitch import serving

FRESH = """
import sys
import numpy as np
import tensorflow as tf
if sys.argv[2]:
    tf.load_op_library(sys.argv[2])
x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(2, 16)
try:
    out = tf.saved_model.load(sys.argv[1]).signatures["serving_default"](x=x)
except Exception as e:
    print(type(e).__name__, e)
    sys.exit(3)
assert "tf_stitch" not in sys.modules
np.save(sys.argv[3], out["score"].numpy())
"""


def _env(tmp_path: Path) -> dict[str, str]:
    """An empty kernel cache and no C++ compiler: what a serving machine has."""
    no_tools = tmp_path / "empty_bin"
    no_tools.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("CXX", "TF_STITCH_CXX", "CC")}
    env.update(
        TF_STITCH_CACHE_DIR=str(tmp_path / "cache"),
        PATH=str(no_tools) + os.pathsep + str(Path(sys.executable).parent),
        PYTHONPATH=str(REPO),
        TF_CPP_MIN_LOG_LEVEL="1",
        CUDA_VISIBLE_DEVICES="",
    )
    return env


@pytest.fixture(scope="module")
def converted(module_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("serving") / "converted"
    converter = tf_stitch.Converter(
        module_dir, targets=("cpu",), signature_keys=["serving_default"]
    )
    converter.convert()
    converter.save(out)
    return out


def _expected(module_dir: Path) -> np.ndarray:
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(2, 16)
    return tf.saved_model.load(str(module_dir)).signatures["serving_default"](x=x)["score"].numpy()


def test_a_fresh_process_loads_the_op_library_by_its_path(
    converted: Path, module_dir: Path, tmp_path: Path
) -> None:
    path = tf_stitch.op_library_path()
    assert Path(path).is_file()
    printed = subprocess.run(
        [sys.executable, "-m", "tf_stitch.cli", "op-library"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert printed.returncode == 0 and printed.stdout.strip() == path, printed.stderr[-2000:]
    result = tmp_path / "score.npy"
    env = _env(tmp_path)
    run = [sys.executable, "-c", FRESH, str(converted)]
    without = subprocess.run([*run, "", str(result)], env=env, capture_output=True, text=True)
    assert without.returncode == 3
    assert "Op type not registered 'StitchedKernel'" in without.stdout
    done = subprocess.run(
        [*run, path, str(result)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    np.testing.assert_allclose(np.load(result), _expected(module_dir), rtol=1e-5, atol=1e-5)


def test_saved_model_cli_runs_a_converted_model(converted: Path, tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "tf_stitch.cli",
        "saved-model-cli",
        "run",
        "--dir",
        str(converted),
        "--tag_set",
        "serve",
        "--signature_def",
        "serving_default",
        "--input_exprs",
        f"x={np.linspace(-1, 1, 32).reshape(2, 16).round(4).tolist()}",  # a literal
    ]
    done = subprocess.run(
        command, env=_env(tmp_path), capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "Result for output key score" in done.stdout


def test_a_converted_model_names_what_it_needs(converted: Path) -> None:
    hint = (converted / serving.HINT_DIR / serving.HINT_NAME).read_text()
    assert "tf_stitch" in hint and "StitchedKernel" in hint
    assert "tf-stitch op-library" in hint and "TF_LoadLibrary" in hint
    assert "tf-stitch saved-model-cli" in hint
