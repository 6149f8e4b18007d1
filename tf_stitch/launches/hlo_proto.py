"""XLA's optimized module as its `HloModuleProto` (TensorFlow ships `hlo_pb2`), read into the
computations `hlo_kernels` counts: opcodes and called computations as XLA holds them, with no
text to parse.

`experimental_get_compiler_ir(...)(stage="optimized_hlo_serialized")` gives the proto's bytes;
a computation's instructions are taken in the module's schedule, the order they run in.
An instruction names the computations it calls by id, in XLA's order: a `while` its body, then
its condition; a `conditional` its branches; a `call`, an `async-start` or a fusion its callee.
"""

from __future__ import annotations

from typing import Any

from tf_stitch.launches.hlo_module import HloInstruction, HloModuleText


def module_from_proto(data: bytes) -> HloModuleText:
    """The computations of a serialized `HloModuleProto`, by name, and its ENTRY's name."""
    from tensorflow.compiler.xla.service import hlo_pb2

    module = hlo_pb2.HloModuleProto()
    try:
        module.ParseFromString(data)
    except Exception as e:  # protobuf's DecodeError, whose module differs by implementation
        raise ValueError(f"not a serialized HloModuleProto: {e}") from None
    if not module.computations:
        raise ValueError("no HLO computations in the module proto")
    names = {c.id: c.name for c in module.computations}
    computations = {
        c.name: [_instruction(i, names) for i in _in_order(module, c)] for c in module.computations
    }
    return HloModuleText(
        computations, module.entry_computation_name or next(reversed(computations))
    )


def _in_order(module: Any, computation: Any) -> list[Any]:
    """A computation's instructions in the module's schedule (the order the text prints and the
    kernels run), where it has one; else as the proto lists them."""
    sequence = module.schedule.sequences.get(computation.id)
    if sequence is None or len(sequence.instruction_ids) != len(computation.instructions):
        return list(computation.instructions)
    by_id = {i.id: i for i in computation.instructions}
    return [by_id[i] for i in sequence.instruction_ids]


def _instruction(inst: Any, names: dict[int, str]) -> HloInstruction:
    missing = [i for i in inst.called_computation_ids if i not in names]
    if missing:
        raise ValueError(f"HLO instruction {inst.name} calls computations {missing} not defined")
    called = [names[i] for i in inst.called_computation_ids]
    roles: dict[str, list[str]] = {}
    if inst.opcode == "while":
        if len(called) != 2:
            raise ValueError(f"while {inst.name} calls {len(called)} computations, not 2")
        roles = {"body": [called[0]], "condition": [called[1]]}
    elif inst.opcode == "conditional":
        roles = {"branch_computations": called}
    elif called:
        roles = {"calls": called}
    config = inst.backend_config
    text = config.decode("utf-8", "replace") if isinstance(config, bytes) else str(config)
    return HloInstruction(inst.name, inst.opcode, roles, text)
