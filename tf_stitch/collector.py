"""Python's cyclic garbage collector paused over a stretch of work, and restored as it was."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused(collect_first: bool = False) -> Iterator[None]:
    """No automatic collection inside the block; the collector is left enabled or not as the
    caller had it. `collect_first` collects before pausing (as `timeit` does before it times),
    so that no collection of earlier garbage is owed when the block ends either.

    Used where a collection costs more than the cycles it frees: `optimize()` allocates millions
    of short-lived IR objects, and each collection they trigger walks the whole heap, with
    TensorFlow's and the model's objects in it (0.05-0.9 s of a BERT-base's optimize()); and
    a measured step must not pay for someone else's garbage."""
    enabled = gc.isenabled()
    if collect_first:
        gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
