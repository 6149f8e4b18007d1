"""Run a function once a module has been imported, without importing it first.

`import tf_stitch` must register the StitchedKernel op (so that `tf.saved_model.load` reads a
stitched SavedModel) but must not import TensorFlow itself: `tf-stitch --help` would take seconds.
So the op library is loaded as soon as TensorFlow is imported: at once if it already is, else
right after its import finishes, whoever imports it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType

_lock = threading.Lock()
_waiting: dict[str, list[Callable[[ModuleType], None]]] = {}


def when_imported(name: str, callback: Callable[[ModuleType], None]) -> None:
    """Calls `callback(module)` now if module `name` is imported, else right after its import."""
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            if name not in _waiting:
                sys.meta_path.insert(0, _Finder(name))
            _waiting.setdefault(name, []).append(callback)
            return
    callback(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds `name` with the other finders and wraps its loader to call the callbacks after."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.busy = False

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name or self.busy:
            return None
        self.busy = True  # the real spec, from the other finders
        spec = None
        try:
            for finder in sys.meta_path:
                if finder is not self and hasattr(finder, "find_spec"):
                    spec = finder.find_spec(fullname, path, target)
                    if spec is not None:
                        break
        finally:
            self.busy = False
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, self)
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, finder: _Finder) -> None:
        self.loader = loader
        self.finder = finder

    def __getattr__(self, name: str) -> object:  # the loader's other methods (resources)
        return getattr(self.loader, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        with _lock:
            if self.finder in sys.meta_path:
                sys.meta_path.remove(self.finder)
            callbacks = _waiting.pop(self.finder.name, [])
        for callback in callbacks:
            callback(module)
