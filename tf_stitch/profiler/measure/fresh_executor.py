"""Functions run by an executor that has never run untraced, so that every op leaves an event.

TensorFlow's executor keeps a cost estimate per kernel (executor.cc's `KernelStats`): it starts
at 10^8 cycles and, on each run made while no trace records the op, moves a tenth of the way to
the cycles measured. Once it falls under the executor's "expensive" threshold, the op is traced
at `host_tracer_level` 3 only, and runs made while tracing never update the estimate again. An
op run a hundred times untraced (a loop body of a hundred trips in one call, or a function
called a hundred times before it is profiled) is then missing from a level-2 trace for the rest
of the process; with level 3 requested they were still missing (TensorFlow 2.21). Counts of
the kernels a step launches came out too low and different from step to step (a Keras BiLSTM:
294 to 2635 a step of the 16,845 it runs).

The estimates belong to one instantiation of a function. Eager calls of a function carry the
caller's `config_proto` as an attribute, and a different one is a different instantiation
(Grappler and kernels made anew, with fresh estimates). `fresh_instantiations()` gives every
function called in its scope such a config, unique to the scope and otherwise the caller's,
so runs made in it under the profiler see every op.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator

from tensorflow.core.protobuf import config_pb2
from tensorflow.python.eager import context

_SCOPES = itertools.count()
SCOPE_PREFIX = "tf_stitch_fresh_executor"


@contextlib.contextmanager
def fresh_instantiations(name: str | None = None) -> Iterator[str]:
    """A scope in which the functions this thread calls are instantiated anew (their executors
    fresh). Yields the scope's name, which is the config's `session_metadata.name`; entering
    with that `name` again calls the same instantiations (interleaved blocks of traced runs).
    The caller's function-call options are restored on exit."""
    ctx = context.context()
    saved = ctx.function_call_options
    config = config_pb2.ConfigProto()
    config.ParseFromString(saved.config_proto_serialized)
    name = name or f"{SCOPE_PREFIX}_{os.getpid()}_{next(_SCOPES)}"
    config.experimental.session_metadata.name = name
    ctx.function_call_options = context.FunctionCallOptions(
        executor_type=saved.executor_type, config_proto=config
    )
    try:
        yield name
    finally:
        ctx.function_call_options = saved
