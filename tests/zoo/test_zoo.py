"""The model zoo: at least 65 models, every keras.applications architecture, each declaring its
inputs and batch size; a few built and run."""

from __future__ import annotations

import keras
import pytest
import tensorflow as tf

from tf_stitch.cli import main
from tf_stitch.zoo import get, zoo


def test_the_zoo_has_every_keras_application_and_65_models() -> None:
    z = zoo()
    assert len(z) >= 65
    apps = {n for n in dir(keras.applications) if n[0].isupper()}
    assert len(apps) == 40 and apps <= set(z)
    families = {e.family for e in z.values()}
    assert {"keras.applications", "transformer", "recurrent", "workload"} <= families
    for name in (
        "bert_base",
        "bert_large",
        "distilbert",
        "gpt2",
        "vit_b16",
        "lstm",
        "gru",
        "bilstm",
    ):
        assert name in z
    for e in z.values():
        assert e.batch >= 1 and e.input_shapes and len(e.input_shapes) == len(e.input_dtypes)


@pytest.mark.parametrize("name", ["MobileNetV3Small", "gpt2", "bilstm", "w2v", "unet_small"])
def test_entries_build_and_take_their_declared_inputs(name: str) -> None:
    entry = get(name)
    built = entry.build(0)
    inputs = built.make_inputs(2, 0)
    assert [tuple(x.shape[1:]) for x in inputs] == [tuple(s) for s in entry.input_shapes]
    assert [x.dtype.name for x in inputs] == list(entry.input_dtypes)
    model = built.model
    out = (
        model(inputs[0] if len(inputs) == 1 else inputs, training=False)
        if hasattr(model, "layers")
        else model(*inputs)
    )
    assert all(t.shape[0] == 2 for t in tf.nest.flatten(out) if t.shape.rank)


def test_same_seed_same_weights() -> None:
    a, b = get("lenet5").build(3), get("lenet5").build(3)
    x = a.make_inputs(1, 0)
    tf.debugging.assert_equal(a.model(x[0]), b.model(x[0]))


def test_unknown_names_and_custom_specs() -> None:
    with pytest.raises(ValueError, match="unknown model 'resnet9000'"):
        get("resnet9000")
    with pytest.raises(ValueError, match="cannot load the model"):
        get("no_such_module:fn")
    with pytest.raises(ValueError, match="not a ZooEntry"):
        get("tf_stitch.zoo:zoo")


def test_zoo_list_prints_every_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["zoo", "list"]) == 0
    out = capsys.readouterr().out
    assert f"{len(zoo())} models" in out
    assert "EfficientNetB7" in out and "float32[600,600,3]" in out
