"""Every fusion decision carries its reason (after XLA's FusionDecision), and every decision of
one optimization goes to one channel: `Records`, which `explain()` prints as one table."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum

LOGGER = logging.getLogger("tf_stitch.fusion")


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


class RecordKind(StrEnum):
    """Which stage decided."""

    PLAN = "plan"  # which ops may join a kernel; merges; groups (fusion/planner.py)
    LIBRARY = "library"  # the ops around each library call (fusion/library_ops.py)
    MEMORY = "memory"  # a value crossing stages: kept on chip or recomputed (memory_plan.py)
    REWRITE = "rewrite"  # the graph rewrites after planning (passes/)
    CODEGEN = "codegen"  # a group's kernel could not be lowered or emitted: TensorFlow runs it
    COMPILE = "compile"  # a kernel did not compile, or its fallback could not be built
    CUDA = "cuda"  # a kernel has no CUDA build: emission refused, nvcc failed or missing
    VALIDATE = "validate"  # the optimized graph failed validation: the original is returned


@dataclass(frozen=True)
class Record:
    """One logged decision: what was considered (`subject`), the verdict, and who decided."""

    subject: str
    decision: Decision
    kind: RecordKind = RecordKind.PLAN

    def __str__(self) -> str:
        return f"{self.subject}: {self.decision}"


class Records:
    """The decisions of one optimization in the order they were made, each once (a merge
    refused in every round of the planner is one record). Each new one is also logged, at
    debug level, on the `tf_stitch.fusion` logger."""

    def __init__(self, records: Iterable[Record] = ()) -> None:
        self._items: list[Record] = []
        self._seen: set[Record] = set()
        self.extend(records)

    def append(self, record: Record) -> None:
        if record in self._seen:
            return
        self._seen.add(record)
        self._items.append(record)
        LOGGER.debug("%s %s", record.kind, record)

    def extend(self, records: Iterable[Record]) -> None:
        for r in records:
            self.append(r)

    def __iter__(self) -> Iterator[Record]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: int) -> Record:
        return self._items[index]

    def table(self) -> list[str]:
        """One row per record: its kind, then `subject: verdict(reason)`; a reason of several
        lines (a compiler's output) goes on under its row, indented."""
        width = max((len(r.kind) for r in self._items), default=0)
        return [
            f"{r.kind:<{width}}  " + str(r).replace("\n", "\n" + " " * (width + 2))
            for r in self._items
        ]
