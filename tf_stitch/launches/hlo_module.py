"""An XLA module as the kernel counter reads it: computations of instructions, each with its
opcode, the computations it calls (by role: `body`, `condition`, `calls`, ...) and its backend
config. hlo_kernels.py reads one from HLO text, hlo_proto.py from an HloModuleProto."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class HloInstruction:
    """One HLO instruction: its name, opcode, called computations and backend config."""

    name: str
    opcode: str
    called: dict[str, list[str]] = field(default_factory=dict)
    backend_config: str = ""


@dataclass(frozen=True)
class HloModuleText:
    """The computations of an HLO module (read from text or a proto), by name, and the ENTRY's
    name."""

    computations: dict[str, list[HloInstruction]]
    entry: str
