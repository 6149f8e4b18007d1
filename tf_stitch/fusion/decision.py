"""Every fusion decision carries its reason (after XLA's FusionDecision)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Decision:
    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        verdict = "allow" if self.ok else "forbid"
        return f"{verdict}({self.reason})" if self.reason else verdict


def allow(reason: str = "") -> Decision:
    return Decision(True, reason)


def forbid(reason: str) -> Decision:
    return Decision(False, reason)


@dataclass(frozen=True)
class Record:
    """One logged decision: what was considered (`subject`) and the verdict."""

    subject: str
    decision: Decision

    def __str__(self) -> str:
        return f"{self.subject}: {self.decision}"
