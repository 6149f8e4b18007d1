"""`tf_stitch.enable()`: stitching inside TensorFlow's own graph optimization, no code changes.

The op library registers a graph optimization pass (runtime/op/graph_pass.cc) that runs on every
function graph TensorFlow instantiates: each `tf.function`, Keras `predict`/`fit`/`evaluate`
step and loaded SavedModel signature, before placement. `enable()` gives it the rewriter
below, which runs the same pipeline as `optimize()` on the function body
(graph/function_bodies.py: arguments, variable reads and results kept, variables live) and
caches the result by the body's bytes, so a retrace or re-instantiation of the same graph costs
a hash. Graphs with too few ops to stitch are passed over at once; a graph the pipeline cannot
handle is left as it was, with one warning.

Functions TensorFlow instantiated before `enable()` (or after `disable()`) keep the graph they
were instantiated with: TensorFlow caches instantiations.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

ENV_VAR = "TF_STITCH"
# Fewer stitchable ops than this: nothing to gain, the graph is passed over.
MIN_STITCHABLE_OPS = 2

_RewriteFn = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p
)


@dataclass
class HookStats:
    """What the pass did since `enable()`: graphs it saw, rewrote, found in the cache, passed
    over (too small) or left alone after a failure, and seconds spent optimizing."""

    seen: int = 0
    rewritten: int = 0
    cache_hits: int = 0
    passed_over: int = 0
    failed: int = 0
    seconds: float = 0.0


@dataclass
class _Settings:
    cuda: bool
    on_chip_budget: int | None


class _State:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.settings: _Settings | None = None
        self.callback: Any = None  # the ctypes function: kept alive while registered
        self.cache: dict[bytes, bytes | None] = {}
        self.stats = HookStats()
        self.warned: set[str] = set()
        self.busy = threading.local()


_state = _State()


def enable(*, cuda: bool | None = None, on_chip_budget: int | None = None) -> None:
    """Stitches every function graph TensorFlow instantiates from now on (see the module's
    doc). `cuda` builds CUDA kernels too (default: when TensorFlow sees a GPU); `on_chip_budget`
    is `optimize()`'s. Idempotent; a second call changes the settings (the cache is kept for
    graphs optimized with the same settings)."""
    import tensorflow as tf

    from tf_stitch.optimize import check_arguments
    from tf_stitch.runtime import op_library

    check_arguments(on_chip_budget, False if cuda is None else cuda)

    op_library.load()
    if cuda is None:
        cuda = bool(tf.config.list_physical_devices("GPU"))
    with _state.lock:
        _state.settings = _Settings(cuda, on_chip_budget)
        if _state.callback is None:
            _state.callback = _RewriteFn(_rewrite)
            op_library.set_graph_rewriter(_state.callback)


def disable() -> None:
    """Stops stitching graphs TensorFlow instantiates from now on."""
    with _state.lock:
        if _state.callback is None:
            return
        from tf_stitch.runtime import op_library

        op_library.set_graph_rewriter(None)
        _state.callback = None
        _state.settings = None


def is_enabled() -> bool:
    return _state.callback is not None


@contextlib.contextmanager
def enabled(*, cuda: bool | None = None, on_chip_budget: int | None = None) -> Iterator[None]:
    """`with tf_stitch.enabled():` stitches the graphs instantiated inside the block, then puts
    the previous state back."""
    before = _state.settings if is_enabled() else None
    enable(cuda=cuda, on_chip_budget=on_chip_budget)
    try:
        yield
    finally:
        if before is None:
            disable()
        else:
            enable(cuda=before.cuda, on_chip_budget=before.on_chip_budget)


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Graphs instantiated inside the block stay TensorFlow's, whatever the state (in every
    thread: the pass is process-wide); the state is put back after."""
    with _state.lock:
        settings = _state.settings if is_enabled() else None
        disable()
    try:
        yield
    finally:
        if settings is not None:
            enable(cuda=settings.cuda, on_chip_budget=settings.on_chip_budget)


def stats() -> HookStats:
    """A copy of what the pass did so far."""
    with _state.lock:
        return HookStats(**vars(_state.stats))


def enable_from_environment() -> None:
    """`enable()` if `TF_STITCH` is set to 1 (or true/yes/on); tf_stitch calls it when
    TensorFlow is imported. If the op library cannot be loaded, one warning says so."""
    if os.environ.get(ENV_VAR, "").strip().lower() not in ("1", "true", "yes", "on"):
        return
    from tf_stitch.runtime.op_library import OpLibraryBuildError

    try:
        enable()
    except OpLibraryBuildError as e:
        warnings.warn(f"{ENV_VAR}=1 but tf_stitch cannot be enabled: {e}", RuntimeWarning, 2)


def _rewrite(data: int, size: int, name: bytes, control_outputs: bytes, out: int) -> int:
    """The pass's callback (any thread; ctypes takes the GIL). Never raises."""
    try:
        if getattr(_state.busy, "active", False):
            return 0  # TensorFlow work the pipeline itself does
        _state.busy.active = True
        try:
            answer = _rewrite_bytes(
                ctypes.string_at(data, size),
                name.decode(errors="replace"),
                [n for n in control_outputs.decode().split("\n") if n],
            )
        finally:
            _state.busy.active = False
        if answer is None:
            return 0
        _set_string(out, answer)
        return 1
    except BaseException as e:  # a callback from C++ must not raise
        with contextlib.suppress(BaseException):
            _set_string(out, f"{type(e).__name__}: {e}".encode())
        return -1


def _set_string(out: int, data: bytes) -> None:
    from tf_stitch.runtime import op_library

    op_library.set_pass_string(out, data)


def _rewrite_bytes(data: bytes, name: str, control_outputs: list[str]) -> bytes | None:
    with _state.lock:
        settings = _state.settings
        if settings is None:
            return None
        _state.stats.seen += 1
        # TensorFlow lists a function's control outputs in no fixed order.
        what = (settings.cuda, settings.on_chip_budget, sorted(control_outputs))
        key = hashlib.sha256(repr(what).encode() + data).digest()
        if key in _state.cache:
            _state.stats.cache_hits += 1
            return _state.cache[key]
    start = time.perf_counter()
    try:
        result = rewrite_function_graph(
            data, control_outputs, settings.cuda, settings.on_chip_budget
        )
    except Exception as e:  # the graph stays TensorFlow's, with one warning
        result = None
        _warn_once(name, f"tf_stitch left function {name} unoptimized: {type(e).__name__}: {e}")
        with _state.lock:
            _state.stats.failed += 1
    with _state.lock:
        _state.stats.seconds += time.perf_counter() - start
        if result is not None:
            _state.stats.rewritten += 1
        _state.cache[key] = result
    return result


def rewrite_function_graph(
    data: bytes,
    control_outputs: list[str],
    cuda: bool = False,
    on_chip_budget: int | None = None,
) -> bytes | None:
    """The function body serialized in `data`, stitched: its serialized GraphDef, or None if
    nothing was stitched (or it has too few ops to try). Raises what the pipeline raises."""
    from tf_stitch.fusion.op_kinds import OP_TABLE
    from tf_stitch.graph import function_bodies
    from tf_stitch.graph.frames import frame_problem
    from tf_stitch.graph.io import GraphDef, graph_from_graph_def, graph_to_graph_def
    from tf_stitch.optimize import optimize_graph

    graph_def = GraphDef.FromString(data)
    stitchable = sum(1 for n in graph_def.node if n.op in OP_TABLE)
    if stitchable < MIN_STITCHABLE_OPS or any(n.op == "StitchedKernel" for n in graph_def.node):
        with _state.lock:
            _state.stats.passed_over += 1
        return None
    try:
        body = function_bodies.split(graph_def, control_outputs)
    except function_bodies.UnsupportedBody:
        with _state.lock:
            _state.stats.passed_over += 1
        return None
    graph = graph_from_graph_def(body.graph_def, body.inputs, body.outputs, targets=body.targets)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one warning per graph, below, not the pipeline's
        optimized, ctx = optimize_graph(graph, on_chip_budget, cuda)
    if not ctx.kernels:
        return None
    optimized_def = graph_to_graph_def(optimized)
    _write_in_kernels(optimized_def, body, cuda)
    joined = function_bodies.join(optimized_def, body)
    problem = frame_problem(joined)
    if problem:  # TensorFlow would refuse it only when it runs it: keep the original
        raise ValueError(f"the stitched graph is not well formed: {problem}")
    return joined.SerializeToString()


@dataclass(frozen=True)
class _Placed:
    """Where a variable lives, as graph/variable_writes.py asks (`.device`)."""

    device: str


def _write_in_kernels(graph_def: Any, body: Any, cuda: bool) -> None:
    """The variable writes of kernels' outputs done by the kernels (graph/variable_writes.py);
    a moved write that is a control output of the function stays, as a NoOp after its kernel
    (TensorFlow finds the function's control outputs by name)."""
    from tensorflow.core.framework import node_def_pb2

    from tf_stitch.graph.variable_writes import write_in_kernels

    # On a GPU, only kernels with a CUDA build may take a write over.
    handles = {name: _Placed("GPU:0" if cuda else "CPU:0") for name in body.handles}
    _, moved = write_in_kernels(graph_def, handles, body.outputs, body.targets)
    for write in sorted(set(moved) & set(body.targets)):
        graph_def.node.append(
            node_def_pb2.NodeDef(name=write, op="NoOp", input=[f"^{moved[write]}"])
        )


def _warn_once(key: str, message: str) -> None:
    with _state.lock:
        if key in _state.warned:
            return
        _state.warned.add(key)
    warnings.warn(message, RuntimeWarning, stacklevel=2)
