"""Variable writes done by the kernels that compute the values, without an AssignVariableOp.

A training step's optimizer updates are stitched kernels (a variable's moments and new value
in one, or all of them in one bundle; passes/forward_writes.py), each new value then written
by an `AssignVariableOp` that takes over its buffer: no kernel on a GPU, but one op more for
the executor to dispatch on a CPU (25 of the 50 ops of an MLP's Adam step). Where a written
value is an output of a StitchedKernel that nothing else reads, the kernel becomes a
`StitchedKernelAssign`: it takes the variable's resource handle and, once its outputs are
computed, makes that output the variable's value as the AssignVariableOp would (under the
variable's lock; runtime/op/kernel_base.h). The AssignVariableOp goes; the kernel waits
for what the write waited for (its control inputs: the variable's reads before it) and what
waited for the write waits for the kernel, so the order of every access to the variable is
TensorFlow's (and `validate_shape` its check). A value also read or fetched, a control input
the kernel itself precedes, or a variable on a GPU written by a kernel without a CUDA build
stays an AssignVariableOp.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from tensorflow.core.framework import graph_pb2, types_pb2

STITCHED_OP = "StitchedKernel"
ASSIGN_OP = "StitchedKernelAssign"
_CUDA_LABEL = b"cuda"  # the `_kernel` attr of a kernel with a CUDA build


def write_in_kernels(
    graph_def: graph_pb2.GraphDef,
    variables: Mapping[str, Any],
    fetches: Sequence[str],
    targets: Sequence[str],
) -> tuple[list[str], dict[str, str]]:
    """Moves each AssignVariableOp of a StitchedKernel's output into the kernel (see the
    module's docstring). `variables` maps Placeholders to the live variables' handles, `fetches`
    are the tensors the function returns and `targets` the nodes it runs for their effects.
    `graph_def` is changed in place. Returns the new targets and {moved write: kernel}."""
    nodes = {n.name: n for n in graph_def.node}
    fetched = set(map(_tensor, fetches))
    readers = Counter(_tensor(i) for n in graph_def.node for i in n.input if not i.startswith("^"))
    consumers: dict[str, set[str]] = {}  # by data or control edges, kept up to date by _move
    for n in graph_def.node:
        for i in n.input:
            consumers.setdefault(_node(i), set()).add(n.name)
    moved: dict[str, str] = {}
    for write in [n for n in graph_def.node if n.op == "AssignVariableOp"]:
        kernel = _kernel_taking(write, nodes, variables, fetched, readers, consumers)
        if kernel is None:
            continue
        _move(write, kernel, nodes, consumers)
        moved[write.name] = kernel.name
    if not moved:
        return list(targets), moved
    kept = [n for n in graph_def.node if n.name not in moved]
    del graph_def.node[:]
    graph_def.node.extend(_topological(kept))
    new_targets: list[str] = []
    for t in targets:
        t = moved.get(t, t)
        if t not in new_targets:
            new_targets.append(t)
    return new_targets, moved


def _tensor(name: str) -> str:
    return name if ":" in name else f"{name}:0"


def _node(name: str) -> str:
    return name.lstrip("^").split(":")[0]


def _kernel_taking(
    write: Any,
    nodes: Mapping[str, Any],
    variables: Mapping[str, Any],
    fetched: set[str],
    readers: Counter[str],
    consumers: Mapping[str, set[str]],
) -> Any:
    """The StitchedKernel that can take `write` over, else None."""
    if len(write.input) < 2:
        return None
    handle = nodes.get(_node(write.input[0]))
    if (
        handle is None
        or handle.op != "Placeholder"
        or handle.attr["dtype"].type != types_pb2.DT_RESOURCE
        or handle.name not in variables
    ):
        return None
    value = _tensor(write.input[1])
    kernel = nodes.get(_node(value))
    if kernel is None or kernel.op not in (STITCHED_OP, ASSIGN_OP) or value in fetched:
        return None
    on_gpu = "GPU" in str(getattr(variables[handle.name], "device", "")).upper()
    if on_gpu and ("_kernel" not in kernel.attr or kernel.attr["_kernel"].s != _CUDA_LABEL):
        return None  # the kernel would be placed on the variable's GPU, with no build there
    if readers[value] != 1:
        return None
    waits = {i[1:] for i in write.input if i.startswith("^")}
    if waits & _descendants(consumers, kernel.name):
        return None  # the kernel precedes something the write waits for
    return kernel


def _descendants(consumers: Mapping[str, set[str]], start: str) -> set[str]:
    """`start` and every node that runs after it by data or control edges."""
    seen, stack = {start}, [start]
    while stack:
        for c in consumers.get(stack.pop(), ()):
            if c not in seen:
                seen.add(c)
                stack.append(c)
    return seen


def _move(write: Any, kernel: Any, nodes: dict[str, Any], consumers: dict[str, set[str]]) -> None:
    """Makes `kernel` write `write`'s variable and wait for what `write` waited for; whatever
    waited for `write` waits for `kernel` (at once, so that later moves see those edges)."""
    if kernel.op == STITCHED_OP:
        kernel.op = ASSIGN_OP
        kernel.attr["N"].i = 0
        kernel.attr["assign_outputs"].list.SetInParent()
        kernel.attr["validate_shapes"].list.SetInParent()
    data = [i for i in kernel.input if not i.startswith("^")]
    waits = [i for i in kernel.input if i.startswith("^")]
    for i in write.input[2:]:
        if i.startswith("^") and i not in waits:
            waits.append(i)
            consumers.setdefault(i[1:], set()).add(kernel.name)
    del kernel.input[:]
    kernel.input.extend([*data, write.input[0], *waits])
    kernel.attr["N"].i += 1
    value = _tensor(write.input[1])
    kernel.attr["assign_outputs"].list.i.append(int(value.split(":")[1]))
    validate = "validate_shape" in write.attr and write.attr["validate_shape"].b
    kernel.attr["validate_shapes"].list.b.append(validate)
    for name in consumers.pop(write.name, set()):
        waiting = nodes[name]
        inputs: list[str] = []
        for i in waiting.input:
            i = f"^{kernel.name}" if i == f"^{write.name}" else i
            if i not in inputs or not i.startswith("^"):
                inputs.append(i)
        del waiting.input[:]
        waiting.input.extend(inputs)
        consumers[kernel.name].add(name)
    for i in write.input:
        consumers.get(_node(i), set()).discard(write.name)
    del nodes[write.name]


def _topological(nodes: list[Any]) -> list[Any]:
    """`nodes` in an order where each comes after its inputs (stable otherwise): a kernel that
    took over a write now also waits for the write's control inputs, which may follow it."""
    by_name = {n.name: n for n in nodes}
    entered: set[str] = set()  # each node once, so a loop's back edge cannot recur
    order: list[Any] = []
    for root in nodes:
        stack = [(root, False)]
        while stack:
            node, done = stack.pop()
            if done:
                order.append(node)
                continue
            if node.name in entered:
                continue
            entered.add(node.name)
            stack.append((node, True))
            for i in reversed(node.input):
                dep = by_name.get(_node(i))
                if dep is not None and dep.name not in entered:
                    stack.append((dep, False))
    return order
