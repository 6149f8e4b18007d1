"""A logdir with two profiles (one of a tf_stitch-optimized model), a corrupt profile and a
`tf-stitch bench` run, shared by the tab's route and browser tests."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import tensorflow as tf

import tf_stitch
from tf_stitch.bench import run_bench
from tf_stitch.profiler.store.profile import STORE_DIR


@pytest.fixture(scope="session")
def tab_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import keras

    out = tmp_path_factory.mktemp("tab") / "bench"
    run_bench(["lr"], out, rounds=1, gpu_target=None, small=True, stream=io.StringIO())
    logdir = out / "tensorboard"
    keras.utils.set_random_seed(0)
    inp = keras.Input((32,))
    h = keras.layers.Dense(64, activation="relu", name="hidden")(inp)
    model = keras.Model(inp, keras.layers.LayerNormalization(name="norm")(h), name="mlp")
    x = tf.random.normal([64, 32])
    optimized = tf_stitch.optimize(model, input_signature=[tf.TensorSpec(x.shape, x.dtype)])
    for run, m in (("opt", optimized), ("plain", model)):
        tf_stitch.profile(m, x, steps=3, warmup=1, logdir=logdir, run_name=run, progress=None)
    broken = logdir / STORE_DIR / "broken"
    broken.mkdir()
    (broken / "meta.json").write_text(json.dumps({"model": "broken"}))
    (broken / "spans.jsonl.gz").write_bytes(b"not gzip at all")
    return logdir
