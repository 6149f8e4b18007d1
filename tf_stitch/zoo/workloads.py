"""The ten fusion workloads of `tf_stitch.workloads` (FusionStitching's and AStitch's sets) as
zoo entries, at their own default batch sizes."""

from __future__ import annotations

from typing import Any

from tf_stitch.zoo.entry import Built, ZooEntry


def _entry(module: Any) -> ZooEntry:
    def build(seed: int) -> Built:
        w = module.build(module.BATCH, seed=seed)
        return Built(w.fn, lambda batch, _seed: w.make_inputs(batch))

    w = module.build(1)  # for its signature (under a second for each workload)
    shapes = tuple(tuple(int(d) for d in s.shape[1:]) for s in w.input_signature)
    dtypes = tuple(s.dtype.name for s in w.input_signature)
    return ZooEntry(
        module.NAME, "workload", module.DESCRIPTION, shapes, dtypes, module.BATCH, build
    )


def entries() -> list[ZooEntry]:
    from tf_stitch.workloads import WORKLOADS

    return [_entry(m) for m in WORKLOADS.values()]
