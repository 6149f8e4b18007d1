"""The op runs of a trace: which host events record one execution of a TensorFlow op.

Every op the TF executor runs leaves a host event named `node_name:OpType` (display name
`OpType`), usually on a `tf_Compute/...` thread line, sometimes on the calling thread when the
executor runs inline. Ops executed eagerly (a callable that is not a graph function) leave an
`EagerExecute` event whose `eager_op` stat names the op instead. The spans, the GPU kernels'
ops and the analyses read them from here; `launches/op_launches.py` counts them per step.
"""

from __future__ import annotations

from typing import NamedTuple

from tf_stitch.profiler.trace.xplane import TraceEvent

# Ops that run no kernel (no device work) when executed: graph plumbing (arguments, return
# values, send/recv between partitions, constants held in the graph), metadata-only ops whose
# output aliases or describes their input's buffer (Reshape, Identity, Shape, ...), and function
# call ops, whose bodies' ops are traced and counted on their own. `_EagerConst` is how eager
# mode wraps a host value into a tensor (a copy, not a kernel); ReadVariableOp hands out the
# variable's buffer. These are reported under
# `OpLaunches.excluded_by_type` (`launches/op_launches.py`) rather than dropped silently.
NO_KERNEL_OPS: frozenset[str] = frozenset(
    {
        "Const",
        "Identity",
        "IdentityN",
        "NoOp",
        "_Arg",
        "_Retval",
        "_Recv",
        "_Send",
        "Placeholder",
        "Reshape",
        "ExpandDims",
        "Squeeze",
        "Snapshot",
        "StopGradient",
        "PreventGradient",
        "Shape",
        "ShapeN",
        "Size",
        "Rank",
        "PartitionedCall",
        "StatefulPartitionedCall",
        "_EagerConst",
        "ReadVariableOp",
    }
)


class OpRun(NamedTuple):
    """One op that ran: its node name (empty for eager ops, which have none) and op type."""

    node: str
    op: str


def op_run_of(event: TraceEvent) -> OpRun | None:
    """The op run an event records (see `op_type_of`), else None."""
    op = op_type_of(event)
    if op is None:
        return None
    return OpRun(event.name[: -len(op) - 1] if event.name.endswith(":" + op) else "", op)


def op_type_of(event: TraceEvent) -> str | None:
    """The op type of an event that records one op execution, else None.

    Executor ops are events named `node_name:OpType` with display name `OpType`; eager ops are
    `EagerExecute` events with `is_func == 0` and an `eager_op` stat. Op types are not checked
    against any registry, so custom ops count like any other.
    """
    disp = event.display_name
    if disp and len(event.name) > len(disp) + 1 and event.name.endswith(":" + disp):
        return disp
    if event.name == "EagerExecute" and event.stats.get("is_func") == 0:
        op = event.stats.get("eager_op")
        return op if isinstance(op, str) and op else None
    return None
