"""SavedModels to convert, and a fresh Python process to load converted ones in: an empty
kernel cache, no C++ compiler on PATH (nor in $CXX / $TF_STITCH_CXX)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

REPO = Path(__file__).resolve().parents[2]


class TwoSignatures(tf.Module):
    """A tf.Module with variables and two signatures (dict outputs, named inputs)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = tf.Variable(tf.random.stateless_normal([16, 16], [1, 2]))
        self.b = tf.Variable(tf.random.stateless_normal([16], [3, 4]))

    @tf.function(input_signature=[tf.TensorSpec([None, 16], tf.float32, name="x")])
    def dense(self, x: tf.Tensor) -> dict[str, tf.Tensor]:
        y = tf.nn.relu(tf.matmul(x, self.w) + self.b) * 2.0 - 1.0
        return {"score": tf.reduce_sum(tf.tanh(y) * y, axis=-1), "features": y}

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, 8], tf.float32, name="logits"),
            tf.TensorSpec([None, 8], tf.float32, name="gate"),
        ]
    )
    def softmax(self, logits: tf.Tensor, gate: tf.Tensor) -> dict[str, tf.Tensor]:
        e = tf.exp(logits - tf.reduce_max(logits, axis=1, keepdims=True))
        probs = e / tf.reduce_sum(e, axis=1, keepdims=True)
        return {"probs": probs * tf.sigmoid(gate) + self.b[:8]}


def save_module(path: Path) -> Path:
    module = TwoSignatures()
    tf.saved_model.save(
        module, str(path), signatures={"serving_default": module.dense, "softmax": module.softmax}
    )
    return path


def keras_cnn() -> keras.Model:
    keras.utils.set_random_seed(7)
    x = keras.Input((12, 12, 3), name="image")
    y = keras.layers.Conv2D(8, 3, padding="same")(x)
    y = keras.layers.BatchNormalization()(y)
    y = keras.layers.ReLU()(y)
    y = keras.layers.MaxPooling2D()(y)
    y = keras.layers.Conv2D(8, 3, padding="same", activation="swish")(y)
    y = keras.layers.GlobalAveragePooling2D()(y)
    y = keras.layers.Dense(5, activation="softmax")(y)
    return keras.Model(x, y)


def keras_transformer_block() -> keras.Model:
    keras.utils.set_random_seed(11)
    x = keras.Input((6, 16), name="tokens")
    a = keras.layers.MultiHeadAttention(num_heads=2, key_dim=8)(x, x)
    h = keras.layers.LayerNormalization(epsilon=1e-6)(x + a)
    f = keras.layers.Dense(32, activation="gelu")(h)
    f = keras.layers.Dense(16)(f)
    y = keras.layers.LayerNormalization(epsilon=1e-6)(h + f)
    return keras.Model(x, y)


def export_keras(model: keras.Model, path: Path) -> Path:
    model.export(str(path), format="tf_saved_model", verbose=False)
    return path


@pytest.fixture(scope="session")
def module_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_module(tmp_path_factory.mktemp("module") / "saved")


@pytest.fixture(scope="session")
def cnn_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_keras(keras_cnn(), tmp_path_factory.mktemp("cnn") / "saved")


@pytest.fixture(scope="session")
def transformer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_keras(keras_transformer_block(), tmp_path_factory.mktemp("block") / "saved")


def random_feed(signature: Any, batch: int = 3, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs for a signature's named inputs (unknown dims are `batch`)."""
    rng = np.random.default_rng(seed)
    _, specs = signature.structured_input_signature
    return {
        name: rng.standard_normal([batch if d is None else d for d in spec.shape.as_list()]).astype(
            spec.dtype.as_numpy_dtype
        )
        for name, spec in specs.items()
    }


def outputs_of(saved: Path, feeds: dict[str, dict[str, np.ndarray]]) -> dict[str, Any]:
    """Each signature's outputs (a dict of arrays) on its feed, in this process."""
    loaded = tf.saved_model.load(str(saved))
    return {
        key: {k: v.numpy() for k, v in loaded.signatures[key](**feed).items()}
        for key, feed in feeds.items()
    }


_RUN_IN_FRESH_PROCESS = """
import pickle, sys
import tensorflow as tf
import tf_stitch
from tf_stitch.runtime import op_library
feeds = pickle.load(open(sys.argv[2], "rb"))
loaded = tf.saved_model.load(sys.argv[1])
out = {}
for _ in range(int(sys.argv[4])):
    out = {
        key: {k: v.numpy() for k, v in loaded.signatures[key](**feed).items()}
        for key, feed in feeds.items()
    }
pickle.dump({"outputs": out, "op_library": str(op_library.loaded_path())}, open(sys.argv[3], "wb"))
"""


def run_fresh(
    saved: Path,
    feeds: dict[str, dict[str, np.ndarray]],
    tmp: Path,
    *,
    compiler: bool = False,
    calls: int = 1,
) -> tuple[dict[str, Any], str, Path, str]:
    """Loads `saved` in a new process after `import tf_stitch` and runs each signature on its
    feed `calls` times. The process gets an empty kernel cache and, unless `compiler`, a PATH
    with no C++ compiler. Returns (outputs, stderr, the cache, the op library it loaded)."""
    import pickle

    cache = tmp / f"fresh_cache_{len(list(tmp.glob('fresh_cache_*')))}"
    feed_file, out_file = tmp / "feeds.pkl", tmp / "outputs.pkl"
    feed_file.write_bytes(pickle.dumps(feeds))
    no_tools = tmp / "empty_bin"
    no_tools.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("CXX", "TF_STITCH_CXX", "CC")}
    env.update(
        TF_STITCH_CACHE_DIR=str(cache),
        PATH=os.environ["PATH"] if compiler else str(no_tools),
        PYTHONPATH=str(REPO),
        TF_CPP_MIN_LOG_LEVEL="1",
        CUDA_VISIBLE_DEVICES="",
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _RUN_IN_FRESH_PROCESS,
            str(saved),
            str(feed_file),
            str(out_file),
            str(calls),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = pickle.loads(out_file.read_bytes())
    return result["outputs"], done.stderr, cache, result["op_library"]


def retarget_binaries(saved: Path, target: bytes = b"riscv64\n") -> int:
    """Rewrites every StitchedKernel's `binary_target` in a SavedModel, as if its binaries had
    been built on another kind of machine. Returns the number of nodes changed."""
    return _edit_stitched_nodes(saved, "binary_target", target)


def strip_binaries(saved: Path) -> int:
    """Removes the binary every StitchedKernel carries (only its source and fallback remain)."""
    return _edit_stitched_nodes(saved, "binary", b"")


def _edit_stitched_nodes(saved: Path, attr: str, value: bytes) -> int:
    path = saved / "saved_model.pb"
    sm = saved_model_pb2.SavedModel()
    sm.ParseFromString(path.read_bytes())
    changed = 0
    for meta in sm.meta_graphs:
        for node in stitched_nodes(meta.graph_def):
            node.attr[attr].s = value
            changed += 1
    path.write_bytes(sm.SerializeToString())
    return changed


def stitched_nodes(graph_def: Any) -> list[Any]:
    nodes = [n for n in graph_def.node if n.op == "StitchedKernel"]
    for f in graph_def.library.function:
        nodes.extend(n for n in f.node_def if n.op == "StitchedKernel")
    return nodes


def saved_graph_def(saved: Path) -> Any:
    sm = saved_model_pb2.SavedModel()
    sm.ParseFromString((saved / "saved_model.pb").read_bytes())
    return sm.meta_graphs[0].graph_def
