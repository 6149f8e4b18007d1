"""The 10 inference workloads of the deep-stitching evaluation (FusionStitching's and AStitch's
sets), one module each: `NAME`, `DESCRIPTION`, `BATCH` and `build(batch, small) -> Workload`."""

from __future__ import annotations

from types import ModuleType

from tf_stitch.workloads import (
    bert,
    birnn,
    crnn,
    dien,
    lr,
    nmt,
    rnn,
    speech,
    transformer_decoder,
    w2v,
)
from tf_stitch.workloads.base import Workload

WORKLOADS: dict[str, ModuleType] = {
    m.NAME: m for m in (lr, w2v, rnn, birnn, nmt, speech, bert, transformer_decoder, dien, crnn)
}


def get(name: str) -> ModuleType:
    """The workload module called `name` (KeyError listing the names if there is none)."""
    try:
        return WORKLOADS[name]
    except KeyError:
        raise KeyError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}") from None


__all__ = ["WORKLOADS", "Workload", "get"]
