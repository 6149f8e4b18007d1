"""Which layer an op belongs to, from its name scopes."""

from __future__ import annotations

from tf_stitch.profiler.trace.layers import OUTSIDE_LAYERS, keras_layer_names, layer_of, model_scope


def test_names_and_scopes() -> None:
    assert model_scope(["m_1/a/x", "m_1/b/y"]) == "m_1"
    assert model_scope(["m_1/a/x", "n/b/y"]) == ""
    assert model_scope(["m_1/a/x", "Identity"]) == "m_1"
    optimized = ["stitched/m_1/a/x", "stitched/m_1/b/y", "stitched/stitched_3", "Identity"]
    assert model_scope(optimized) == "stitched/m_1"
    inlined = ["PartitionedCall/stitched/m_1/a/x", "PartitionedCall/stitched/stitched_3"]
    assert model_scope(inlined) == "PartitionedCall/stitched/m_1"
    assert layer_of("stitched/stitched_3", "stitched/m_1", None) == OUTSIDE_LAYERS
    assert layer_of("stitched/m_1/b/y", "stitched/m_1", None) == "b"
    assert layer_of("m_1/dense_1/MatMul", "m_1", None) == "dense_1"
    assert layer_of("m_1/dense_1/MatMul", "m_1", keras_layer_names(_Model(["dense"]))) == "dense"
    assert layer_of("m_1/Identity", "m_1", None) == OUTSIDE_LAYERS
    assert layer_of("block/attn/MatMul", "", None) == "block"


class _Layer:
    def __init__(self, name: str) -> None:
        self.name = name


class _Model:
    def __init__(self, names: list[str]) -> None:
        self.layers = [_Layer(n) for n in names]
