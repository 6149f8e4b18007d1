"""Converted SavedModels run in a fresh process with an empty cache and no compiler, and give
the original's outputs; names, signatures and structure are preserved."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tf_stitch
from tests.convert.conftest import (
    outputs_of,
    random_feed,
    retarget_binaries,
    run_fresh,
    saved_graph_def,
    stitched_nodes,
    strip_binaries,
)
from tf_stitch.runtime import cache, prebuilt

pytestmark = pytest.mark.usefixtures("kernel_cache")


def feeds_for(saved: Path, batch: int = 3) -> dict[str, dict[str, np.ndarray]]:
    loaded = tf.saved_model.load(str(saved))
    return {k: random_feed(s, batch, seed=i) for i, (k, s) in enumerate(loaded.signatures.items())}


def assert_same(expected: dict, actual: dict, atol: float = 2e-5) -> None:
    assert expected.keys() == actual.keys()
    for key in expected:
        assert expected[key].keys() == actual[key].keys(), key
        for name in expected[key]:
            e, a = expected[key][name], actual[key][name]
            assert e.shape == a.shape and e.dtype == a.dtype, (key, name)
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=atol, err_msg=f"{key}/{name}")


def convert(saved: Path, out: Path, **kw) -> tf_stitch.Converter:
    converter = tf_stitch.Converter(saved, targets=("cpu",), **kw)
    converter.convert()
    converter.save(out)
    return converter


@pytest.mark.parametrize("model", ["module_dir", "cnn_dir", "transformer_dir"])
def test_converted_model_runs_in_a_fresh_process_without_a_compiler(
    model: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    saved = request.getfixturevalue(model)
    out = tmp_path / "converted"
    converter = convert(saved, out)
    kernels = sum(len(c.context.kernels) for c in converter.converted.values())
    assert kernels >= 1
    feeds = feeds_for(saved, batch=3)
    expected = outputs_of(saved, feeds)
    actual, stderr, cache, op_lib = run_fresh(out, feeds, tmp_path)
    assert_same(expected, actual)
    # The op came from the library installed with the package, every kernel from the binary
    # its node carries (installed into the empty cache); nothing fell back or compiled.
    assert Path(op_lib).parent == prebuilt.PACKAGED_DIR
    assert "runs its original TensorFlow ops" not in stderr
    assert not (cache / "ops").exists()
    installed = list((cache / "kernels").glob("*/*.so"))
    keys = {n.attr["cache_key"].s.decode() for n in stitched_nodes(saved_graph_def(out))}
    assert {p.stem for p in installed} == keys


def test_signatures_names_and_structure_are_preserved(module_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "converted"
    convert(module_dir, out, signature_keys=["softmax"])
    original, converted = tf.saved_model.load(str(module_dir)), tf.saved_model.load(str(out))
    assert set(converted.signatures) == {"serving_default", "softmax"}
    for key in ("serving_default", "softmax"):
        a, b = original.signatures[key], converted.signatures[key]
        assert a.structured_input_signature == b.structured_input_signature
        assert a.structured_outputs.keys() == b.structured_outputs.keys()
    # Only the chosen signature is stitched; the other keeps reading the variables.
    ops = {
        key: {n.op for f in [converted.signatures[key]] for n in f.graph.as_graph_def().node}
        | {
            n.op
            for fd in converted.signatures[key].graph.as_graph_def().library.function
            for n in fd.node_def
        }
        for key in ("serving_default", "softmax")
    }
    assert "StitchedKernel" in ops["softmax"]
    assert "StitchedKernel" not in ops["serving_default"]
    assert "ReadVariableOp" in ops["serving_default"]
    assert "ReadVariableOp" not in ops["softmax"]  # frozen
    feeds = feeds_for(module_dir)
    assert_same(outputs_of(module_dir, feeds), outputs_of(out, feeds))


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (
            retarget_binaries,
            "the binary it carries does not fit this machine: it was built for riscv64, this is",
        ),
        (strip_binaries, "the node carries no binary"),
    ],
)
def test_fallback_runs_the_original_ops_when_no_kernel_can_be_loaded(
    module_dir: Path, tmp_path: Path, edit, reason: str
) -> None:
    """An empty cache, no compiler, and a carried binary that does not fit (or none)."""
    out = tmp_path / "converted"
    convert(module_dir, out)
    assert edit(out) >= 2
    feeds = feeds_for(module_dir)
    actual, stderr, cache, _ = run_fresh(out, feeds, tmp_path, calls=3)
    assert_same(outputs_of(module_dir, feeds), actual)
    warnings = [line for line in stderr.splitlines() if "runs its original TensorFlow ops" in line]
    assert len(warnings) == 2, stderr  # one per kernel, though each ran three times
    assert reason in stderr and "no C++ compiler" in stderr
    assert not list(cache.glob("kernels/*/*.so"))


def test_a_binary_that_does_not_fit_is_compiled_from_source_on_first_use(
    module_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "converted"
    convert(module_dir, out)
    retarget_binaries(out)
    feeds = feeds_for(module_dir)
    actual, stderr, cache, _ = run_fresh(out, feeds, tmp_path, compiler=True)
    assert_same(outputs_of(module_dir, feeds), actual)
    assert "runs its original TensorFlow ops" not in stderr
    assert len(list(cache.glob("kernels/*/*.so"))) == 2  # compiled here, from the sources


def test_build_checks_numerics_and_measures_kernels(module_dir: Path, tmp_path: Path) -> None:
    converter = tf_stitch.Converter(module_dir, input_shapes={"x": [4, 16]}, targets=["cpu"])
    converter.convert()
    rng = np.random.default_rng(1)

    def batches():
        yield {"x": rng.standard_normal((4, 16)).astype(np.float32)}
        yield {
            "logits": rng.standard_normal((2, 8)).astype(np.float32),
            "gate": rng.standard_normal((2, 8)).astype(np.float32),
        }

    converter.build(batches)
    dense = converter.converted["serving_default"]
    assert dense.specs["x"].shape == [4, 16]
    assert dense.launches is not None and dense.launches[1] < dense.launches[0]
    assert dense.max_abs_diff is not None and dense.max_abs_diff < 1e-4
    text = converter.summary(file=io.StringIO())
    assert "signature 'serving_default': inputs x float32(4, 16)" in text
    assert "kernels replace" in text and "kernels per step (measured)" in text
    assert "carries a" in text and "fallback tf_stitch_fallback_" in text
    converter.save(tmp_path / "out")
    loaded = tf.saved_model.load(str(tmp_path / "out"))
    with pytest.raises((ValueError, TypeError, tf.errors.InvalidArgumentError)):
        loaded.signatures["serving_default"](x=tf.zeros([3, 16]))  # the fixed shape holds


def test_build_rejects_a_converted_graph_that_disagrees(module_dir: Path) -> None:
    converter = tf_stitch.Converter(module_dir, signature_keys="serving_default", targets=["cpu"])
    converter.convert()
    c = converter.converted["serving_default"]
    original = c.original
    c.original = lambda **kw: {k: v + 1.0 for k, v in original(**kw).items()}
    with pytest.raises(tf_stitch.ConversionError, match="differs from the original"):
        converter.build(lambda: [[np.ones((2, 16), np.float32)]])


def test_cuda_target_embeds_fatbins(module_dir: Path, tmp_path: Path) -> None:
    from tf_stitch.runtime.cuda_compiler import find_nvcc

    if find_nvcc() is None:
        pytest.skip("no nvcc")
    converter = tf_stitch.Converter(module_dir, signature_keys="softmax")
    converter.convert()
    converter.save(tmp_path / "out")
    nodes = stitched_nodes(saved_graph_def(tmp_path / "out"))
    assert nodes and all(n.attr["cuda_binary"].s for n in nodes)
    for n in nodes:
        key = n.attr["cuda_key"].s.decode()
        fatbin = cache.cache_dir() / "cuda" / key[:2] / f"{key}.fatbin"
        assert n.attr["cuda_binary"].s == fatbin.read_bytes()
        assert n.attr["binary"].s and n.attr["_kernel"].s == b"cuda"
    text = converter.summary(file=io.StringIO())
    assert "targets: cpu, cuda" in text


def test_overwrite_replaces_an_existing_output(module_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "parent" / "out"
    out.mkdir(parents=True)
    (out / "old.txt").write_text("old")
    converter = tf_stitch.Converter(module_dir, targets=["cpu"])
    converter.convert()
    converter.save(out, overwrite=True)
    assert not (out / "old.txt").exists() and (out / "saved_model.pb").exists()
    assert [p.name for p in out.parent.iterdir()] == ["out"]  # nothing staged is left


def test_convert_saved_model_one_liner(module_dir: Path, tmp_path: Path) -> None:
    converter = tf_stitch.convert_saved_model(module_dir, tmp_path / "out", targets=["cpu"])
    assert set(converter.converted) == {"serving_default", "softmax"}
    feeds = feeds_for(module_dir)
    assert_same(outputs_of(module_dir, feeds), outputs_of(tmp_path / "out", feeds))
    shutil.rmtree(tmp_path / "out")


def test_a_keras_rnn_converts_around_its_loop(tmp_path: Path) -> None:
    import keras

    keras.utils.set_random_seed(3)
    x = keras.Input((5, 4), name="steps")
    h = keras.layers.GRU(6)(x)
    model = keras.Model(
        x, keras.layers.Dense(3, activation="softmax")(keras.layers.LayerNormalization()(h))
    )
    saved = tmp_path / "rnn"
    model.export(str(saved), format="tf_saved_model", verbose=False)
    converter = tf_stitch.Converter(saved, signature_keys="serving_default", targets=["cpu"])
    converter.convert()
    c = converter.converted["serving_default"]
    assert c.context.kernels  # the layer norm and softmax head
    assert any(n.op in ("While", "StatelessWhile") for n in c.graph_def.node)
    converter.save(tmp_path / "out")
    feeds = {
        "serving_default": random_feed(
            tf.saved_model.load(str(saved)).signatures["serving_default"]
        )
    }
    assert_same(outputs_of(saved, feeds), outputs_of(tmp_path / "out", feeds))


def test_identical_signatures_are_converted_and_saved_once(cnn_dir: Path, tmp_path: Path) -> None:
    converter = tf_stitch.Converter(cnn_dir, targets=["cpu"])
    converter.convert()
    converted = converter.converted
    assert set(converted) == {"serve", "serving_default"}  # Keras export writes both
    first, second = converter.signature_keys
    assert converted[second].same_as == first
    assert converted[second].function is converted[first].function
    assert f"signature {second!r}: the same function as {first!r}" in converter.summary()
    out = converter.save(tmp_path / "out")
    assert len(stitched_nodes(saved_graph_def(out))) == len(converted[first].context.kernels)
    loaded = tf.saved_model.load(str(out))
    original = tf.saved_model.load(str(cnn_dir))
    feed = random_feed(original.signatures[first])
    for key in (first, second):
        got, want = loaded.signatures[key](**feed), original.signatures[key](**feed)
        assert got.keys() == want.keys()
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=2e-5)


def test_different_signatures_are_not_merged(module_dir: Path) -> None:
    converter = tf_stitch.Converter(module_dir, targets=["cpu"])
    converter.convert()
    assert all(c.same_as is None for c in converter.converted.values())
