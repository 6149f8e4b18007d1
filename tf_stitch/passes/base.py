"""What every pass is: a name and a pure `Graph -> Graph` function, plus a shared context.

The context carries the options and collects what later steps report (fusion decisions, the
kernels that were built, warnings); a pass never mutates the graph it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tf_stitch.fusion.decision import Record
from tf_stitch.fusion.memory_plan import DEFAULT_BUDGET_BYTES
from tf_stitch.graph.ir import Graph

MAX_ON_CHIP_BUDGET = 16 * 1024 * 1024


@dataclass
class Options:
    on_chip_budget: int = DEFAULT_BUDGET_BYTES
    # Compile kernels while outlining (off only in tests of the pass structure).
    compile: bool = True

    def __post_init__(self) -> None:
        budget = self.on_chip_budget
        if not isinstance(budget, int) or isinstance(budget, bool):
            raise TypeError(f"on_chip_budget must be an int (bytes), got {type(budget).__name__}")
        if not 0 <= budget <= MAX_ON_CHIP_BUDGET:
            raise ValueError(
                f"on_chip_budget must be between 0 and {MAX_ON_CHIP_BUDGET} bytes, got {budget}"
            )


@dataclass
class KernelInfo:
    """What outline built for one group: shown by explain() and the TensorBoard tab."""

    node: str
    name: str
    members: list[str]
    schedule: str
    memory: str
    inputs: list[str]
    outputs: list[str]
    source: str
    cache_key: str


@dataclass
class PassContext:
    options: Options = field(default_factory=Options)
    records: list[Record] = field(default_factory=list)
    kernels: list[KernelInfo] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    plan: Any = None  # the fusion plan `stitch` made for `outline`


@dataclass(frozen=True)
class Pass:
    """A named graph rewrite. `fn` must not modify its input graph."""

    name: str
    fn: Callable[[Graph, PassContext], Graph]
    doc: str = ""

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        return self.fn(graph, ctx)


def graph_pass(name: str) -> Callable[[Callable[[Graph, PassContext], Graph]], Pass]:
    """Decorator: turns `def f(graph, ctx) -> Graph` into a Pass called `name`."""

    def wrap(fn: Callable[[Graph, PassContext], Graph]) -> Pass:
        return Pass(name, fn, (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else "")

    return wrap
