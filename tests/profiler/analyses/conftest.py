"""The recorded profile the analysis tests read (`tools/record_analysis_fixture.py`): a Keras
CNN (Conv2D + BN + ReLU, depthwise conv, global average pooling, Dense) at batch 2, 4 steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from tf_stitch.profiler.store.profile import Profile

RECORDED = Path(__file__).resolve().parent.parent / "fixtures" / "recorded"
PREFIX = "small_cnn_1/"


@pytest.fixture(scope="session")
def recorded() -> Profile:
    return Profile.load(RECORDED, "small_cnn")
