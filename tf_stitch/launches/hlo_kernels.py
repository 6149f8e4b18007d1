"""Counting the kernels one run of an XLA module executes, from its optimized HLO text.

Works on the text XLA prints after optimization (`experimental_get_compiler_ir(...)(stage=
"optimized_hlo")` for XLA:CPU, or an XLA:GPU dump). After optimization every `fusion`, library
`custom-call` and unfused work instruction (`copy`, `dot`, `reduce`, ...) of the ENTRY
computation runs as one kernel; control flow (`while`, `call`, `conditional`) is followed into
the computations it runs.
"""

from __future__ import annotations

import inspect
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf

from tf_stitch.launches.hlo_module import HloInstruction, HloModuleText
from tf_stitch.launches.hlo_proto import module_from_proto

# Instructions that launch no kernel: they name, alias, group or order existing buffers (or
# are resolved at compile time) and generate no device code of their own.
NO_KERNEL_OPCODES: frozenset[str] = frozenset(
    {
        "parameter",
        "constant",
        "tuple",
        "get-tuple-element",
        "bitcast",
        "after-all",
        "add-dependency",
        "opt-barrier",
        "partition-id",
        "replica-id",
        "domain",
    }
)

# Second halves of asynchronous pairs; the pair is counted once, at its `*-start` (or `send` /
# `recv`) instruction.
ASYNC_COMPLETION_OPCODES: frozenset[str] = frozenset({"async-update", "async-done"})

_COMPUTATION_HEADER = re.compile(r"^(ENTRY\s+)?%?([^\s(]+)\s*(?:\(.*)?\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([^\s=]+)\s*=\s*(.*)$")
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-]*)\(")
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
_SINGLE_REF = re.compile(
    r"\b(calls|to_apply|condition|body|true_computation|false_computation)=%?([\w.\-]+)"
)
_LIST_REF = re.compile(r"\b(calls|branch_computations)=\{([^}]*)\}")
_TRIP_COUNT = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)')


@dataclass(frozen=True)
class HloKernels:
    """Kernels executed per run of an HLO module's ENTRY computation.

    `total` and `by_opcode` count executions (a loop body's kernels once per trip);
    `by_name` lists each kernel-launching instruction once, as (name, opcode), in program order.
    """

    total: int
    by_opcode: dict[str, int] = field(default_factory=dict)
    by_name: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _balanced_end(text: str, start: int) -> int:
    """Index just past the bracket group opening at `text[start]` (quotes respected)."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack: list[str] = []
    i = start
    while i < len(text):
        ch = text[i]
        if ch == '"':
            m = _QUOTED.match(text, i)
            i = m.end() if m else len(text)
            continue
        if ch in pairs:
            stack.append(pairs[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                return i + 1
        i += 1
    return len(text)


def _skip_shape(rhs: str) -> int:
    """Index of the first character after the shape that starts an instruction's right side."""
    i = 0
    while i < len(rhs) and not rhs[i].isspace():
        i = _balanced_end(rhs, i) if rhs[i] in "([{" else i + 1
    return i


def _backend_config(attrs: str) -> str:
    """The backend_config attribute's text (JSON), unescaped if it was printed as a string."""
    pos = attrs.find("backend_config=")
    if pos < 0:
        return ""
    start = pos + len("backend_config=")
    if attrs.startswith('"', start):
        m = _QUOTED.match(attrs, start)
        raw = m.group(0)[1:-1] if m else ""
        return raw.replace('\\"', '"').replace("\\\\", "\\")
    if attrs.startswith("{", start):
        return attrs[start : _balanced_end(attrs, start)]
    return ""


def _called_computations(attrs: str) -> dict[str, list[str]]:
    """Computations an instruction refers to, by attribute (`calls`, `body`, ...)."""
    text = _QUOTED.sub('""', attrs)
    called: dict[str, list[str]] = {}
    for role, names in _LIST_REF.findall(text):
        called[role] = [n.strip().lstrip("%") for n in names.split(",") if n.strip()]
    for role, name in _SINGLE_REF.findall(text):
        called.setdefault(role, [name])
    return called


def parse_instruction(line: str) -> HloInstruction | None:
    """Parse one instruction line of HLO text; None if the line is not an instruction."""
    m = _INSTRUCTION.match(line)
    if not m:
        return None
    name, rhs = m.group(1), m.group(2)
    op = _OPCODE.match(rhs, _skip_shape(rhs))
    if not op:
        return None
    attrs = rhs[_balanced_end(rhs, op.end() - 1) :]
    return HloInstruction(name, op.group(1), _called_computations(attrs), _backend_config(attrs))


def parse_hlo_module(hlo_text: str) -> HloModuleText:
    """Split HLO module text into computations of parsed instructions."""
    computations: dict[str, list[HloInstruction]] = {}
    entry = ""
    current: list[HloInstruction] | None = None
    for line in hlo_text.splitlines():
        stripped = line.strip()
        if current is None:
            header = _COMPUTATION_HEADER.match(stripped)
            if header and not stripped.startswith("HloModule"):
                current = computations.setdefault(header.group(2), [])
                entry = header.group(2) if header.group(1) else entry
        elif stripped == "}":
            current = None
        elif (inst := parse_instruction(line)) is not None:
            current.append(inst)
    if not computations:
        raise ValueError("no HLO computations found in the text")
    return HloModuleText(computations, entry or next(reversed(computations)))


@dataclass
class _Tally:
    total: int = 0
    by_opcode: Counter[str] = field(default_factory=Counter)
    by_name: dict[tuple[str, str], None] = field(default_factory=dict)  # an ordered set
    notes: dict[str, None] = field(default_factory=dict)  # an ordered set

    def add(self, other: _Tally, times: int = 1) -> None:
        self.total += other.total * times
        for op, n in other.by_opcode.items():
            self.by_opcode[op] += n * times
        self.by_name.update(other.by_name)
        self.notes.update(other.notes)


class _KernelCounter:
    """Counts kernels per computation, following control flow, memoized by computation."""

    def __init__(self, module: HloModuleText) -> None:
        self.module = module
        self.cache: dict[str, _Tally] = {}
        self.active: set[str] = set()

    def computation(self, name: str) -> _Tally:
        if name in self.cache:
            return self.cache[name]
        if name not in self.module.computations:
            raise ValueError(f"HLO computation {name!r} is referenced but not defined")
        if name in self.active:
            raise ValueError(f"HLO computation {name!r} calls itself")
        self.active.add(name)
        tally = _Tally()
        for inst in self.module.computations[name]:
            tally.add(self.instruction(inst))
        self.active.discard(name)
        self.cache[name] = tally
        return tally

    def instruction(self, inst: HloInstruction) -> _Tally:
        op = inst.opcode
        if op in NO_KERNEL_OPCODES or op in ASYNC_COMPLETION_OPCODES or op.endswith("-done"):
            return _Tally()
        if op == "while":
            return self.while_loop(inst)
        if op == "conditional":
            return self.conditional(inst)
        if op == "call" or (op == "async-start" and inst.called.get("calls")):
            callee = (inst.called.get("to_apply") or inst.called.get("calls") or [""])[0]
            return self.computation(callee)
        return _Tally(1, Counter({op: 1}), {(inst.name, op): None})

    def while_loop(self, inst: HloInstruction) -> _Tally:
        """The body runs `n` times and the condition `n + 1` times."""
        tally = _Tally()
        m = _TRIP_COUNT.search(inst.backend_config)
        trips = int(m.group(1)) if m else 1
        condition = self.computation(inst.called["condition"][0])
        body = self.computation(inst.called["body"][0])
        if not m:
            per_trip = body.total + condition.total
            note = f"while {inst.name}: trip count unknown, counted one trip ({per_trip} a trip)"
            tally.notes[note] = None
        tally.add(condition, trips + 1)
        tally.add(body, trips)
        return tally

    def conditional(self, inst: HloInstruction) -> _Tally:
        """The branch with the most kernels (which one runs is only known at run time)."""
        branches = inst.called.get("branch_computations") or [
            *inst.called.get("true_computation", []),
            *inst.called.get("false_computation", []),
        ]
        if not branches:
            raise ValueError(f"conditional {inst.name} has no branch computations")
        counts = {b: self.computation(b) for b in branches}
        best = max(branches, key=lambda b: counts[b].total)
        tally = _Tally()
        tally.add(counts[best])
        per_branch = ", ".join(f"{b}={counts[b].total}" for b in branches)
        note = f"conditional {inst.name}: counted the largest branch {best} ({per_branch})"
        tally.notes[note] = None
        return tally


def count_hlo_kernels(hlo_text: str) -> HloKernels:
    """Count the kernels one run of the ENTRY computation of optimized HLO text executes.

    Counted: each `fusion`, `custom-call`, `copy` and other work instruction outside fusions;
    each async pair once. Not counted: `NO_KERNEL_OPCODES`. `while` adds its body times the trip
    count from `backend_config` (`known_trip_count.n`; one trip and a note if absent) and its
    condition one time more; `call` adds its callee; `conditional` its largest branch (noted).
    """
    return count_module_kernels(parse_hlo_module(hlo_text))


def count_module_kernels(module: HloModuleText) -> HloKernels:
    """`count_hlo_kernels` of a module already read (from text, or hlo_proto.py's proto)."""
    tally = _KernelCounter(module).computation(module.entry)
    return HloKernels(
        total=tally.total,
        by_opcode=dict(sorted(tally.by_opcode.items())),
        by_name=list(tally.by_name),
        notes=list(tally.notes),
    )


def _python_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The Python function behind a `tf.function`, or a plain function wrapping `fn`."""
    inner: Callable[..., Any] | None = getattr(fn, "python_function", None)
    if callable(inner):
        return inner
    if inspect.isfunction(fn):
        return fn
    return lambda *args: fn(*args)


def compiler_ir(fn: Callable[..., Any], inputs: Any, stage: str) -> Any:
    """XLA's IR of `fn(*inputs)` compiled with `jit_compile=True`, at `stage` ("optimized_hlo"
    text or "optimized_hlo_serialized" proto bytes for this host's CPU; "hlo_serialized" bytes
    of the unoptimized module)."""
    if isinstance(inputs, tf.Tensor | np.ndarray) or not isinstance(inputs, list | tuple):
        inputs = (inputs,)
    args = [tf.convert_to_tensor(v) if isinstance(v, np.ndarray) else v for v in inputs]
    compiled = tf.function(_python_function(fn), jit_compile=True)
    try:
        return compiled.experimental_get_compiler_ir(*args)(stage=stage)
    except (tf.errors.OpError, ValueError) as e:
        message = getattr(e, "message", None) or str(e)
        raise RuntimeError(f"XLA could not compile the function: {message}") from e


def count_xla_cpu_launches(fn: Callable[..., Any], inputs: Any) -> HloKernels:
    """Count the kernels XLA (on this host's CPU) runs for one call `fn(*inputs)`, from the
    optimized module's proto (hlo_proto.py)."""
    data: bytes = compiler_ir(fn, inputs, "optimized_hlo_serialized")
    return count_module_kernels(module_from_proto(data))
