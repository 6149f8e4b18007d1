"""Kernel launches counted and modelled: `count_launches` and its `LaunchReport` (`report.py`),
the ops a traced run executed, per step (`op_launches.py`, on the profiler's op events,
`profiler/trace/op_events.py`), the GPU launch model of a traced run (`gpu_launches.py`,
`gpu_layout.py`), and XLA's kernels from its HLO (`hlo_kernels.py`; XLA:GPU without a GPU:
`xla_gpu.py`, `xla_gpu_compile.py`, `hlo_copies.py`, `xla_gpu_targets/`).

The names are imported on first use, so that importing a module of this package imports no
TensorFlow: `python -m tf_stitch.launches.xla_gpu_compile` runs JAX in a process of its own.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tf_stitch.launches.report import LaunchReport, count_launches

__all__ = ["LaunchReport", "count_launches"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.report"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
