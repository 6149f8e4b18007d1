"""tf_stitch: deep kernel fusion (FusionStitching / AStitch) and across-stack profiling for
TensorFlow. The public API, nothing else.

Importing tf_stitch imports no TensorFlow (the command line's `--help` answers at once): each
name below is imported on first use. The StitchedKernel op is registered as soon as TensorFlow
is imported (at once if it already is), so that `tf.saved_model.load` reads stitched
SavedModels; without a packaged op library or a compiler, that is done (with a clear error)
when the op is first needed instead.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tf_stitch.import_hook import when_imported
from tf_stitch.version import __version__ as __version__

if TYPE_CHECKING:
    from tf_stitch.convert import ConversionError, Converter, convert_saved_model
    from tf_stitch.graph.freeze import VariableWriteError
    from tf_stitch.hook import disable, enable, enabled, is_enabled
    from tf_stitch.keras_switch import stitch, unstitch
    from tf_stitch.launches import LaunchReport, count_launches
    from tf_stitch.optimize import (
        OptimizedFunction,
        explain,
        function,
        generated_code,
        optimize,
    )
    from tf_stitch.profiler.analyses.facade import ProfileAnalysis
    from tf_stitch.profiler.api import ProfileError, profile
    from tf_stitch.profiler.store.profile import Profile
    from tf_stitch.serving import op_library_path


# Each public name and the module that defines it.
_EXPORTS = {
    "ConversionError": "tf_stitch.convert",
    "Converter": "tf_stitch.convert",
    "convert_saved_model": "tf_stitch.convert",
    "VariableWriteError": "tf_stitch.graph.freeze",
    "disable": "tf_stitch.hook",
    "enable": "tf_stitch.hook",
    "enabled": "tf_stitch.hook",
    "is_enabled": "tf_stitch.hook",
    "stitch": "tf_stitch.keras_switch",
    "unstitch": "tf_stitch.keras_switch",
    "LaunchReport": "tf_stitch.launches",
    "count_launches": "tf_stitch.launches",
    "OptimizedFunction": "tf_stitch.optimize",
    "explain": "tf_stitch.optimize",
    "function": "tf_stitch.optimize",
    "generated_code": "tf_stitch.optimize",
    "optimize": "tf_stitch.optimize",
    "ProfileAnalysis": "tf_stitch.profiler.analyses.facade",
    "ProfileError": "tf_stitch.profiler.api",
    "profile": "tf_stitch.profiler.api",
    "Profile": "tf_stitch.profiler.store.profile",
    "op_library_path": "tf_stitch.serving",
}

__all__ = [
    "ConversionError",
    "Converter",
    "LaunchReport",
    "OptimizedFunction",
    "Profile",
    "ProfileAnalysis",
    "ProfileError",
    "VariableWriteError",
    "convert_saved_model",
    "count_launches",
    "disable",
    "enable",
    "enabled",
    "explain",
    "function",
    "generated_code",
    "is_enabled",
    "op_library_path",
    "optimize",
    "profile",
    "stitch",
    "unstitch",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:  # a submodule (`tf_stitch.profiler`), imported on first use too
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module 'tf_stitch' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


class _Package(ModuleType):
    """tf_stitch itself: `tf_stitch.optimize` stays the function when its module, of the same
    name, is imported (the import system sets a package's attribute to each submodule)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if _EXPORTS.get(name, "").endswith(f".{name}") and isinstance(value, ModuleType):
            value = getattr(value, name, value)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


def _register_op(tensorflow: ModuleType) -> None:
    from tf_stitch import hook
    from tf_stitch.runtime import op_library

    op_library.load_if_possible()
    hook.enable_from_environment()


when_imported("tensorflow", _register_op)
