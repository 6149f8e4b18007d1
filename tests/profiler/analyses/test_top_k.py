"""Top-k layers and ops of the recorded profile."""

from __future__ import annotations

import pytest

from tests.profiler.analyses.conftest import PREFIX
from tf_stitch.profiler.analyses.top_k import top_k
from tf_stitch.profiler.store.profile import Profile


def test_top_layers_with_their_share(recorded: Profile) -> None:
    top = top_k(recorded.table("layer"), 3)
    assert list(top["rank"]) == [1, 2, 3]
    assert list(top.name) == ["(framework: call)", "(framework: return)", "conv"]
    assert top.ms_per_step.tolist() == pytest.approx([0.422490, 0.220299, 0.121574], abs=1e-6)
    assert top.share.iloc[2] == pytest.approx(0.121574e6 / 1196314.0, rel=1e-5)


def test_top_op_is_the_fused_convolution(recorded: Profile) -> None:
    top = top_k(recorded.table("op"), 2)
    assert top.name.iloc[0] == PREFIX + "conv_1/BiasAdd"
    assert top.type.iloc[0] == "_FusedConv2D"
    assert top.type.iloc[1] == "DepthwiseConv2dNative"


def test_k_must_be_positive(recorded: Profile) -> None:
    with pytest.raises(ValueError, match="k must be"):
        top_k(recorded.table("op"), 0)
