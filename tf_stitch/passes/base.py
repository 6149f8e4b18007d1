"""What every pass is: a name and a pure `Graph -> Graph` function, plus a shared context.

The context carries the options and collects what later steps report (fusion decisions, the
kernels that were built, warnings); a pass never mutates the graph it is given.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

from tf_stitch.codegen.compilers import Compilers
from tf_stitch.fusion.decision import Decision, Record, RecordKind, Records, forbid
from tf_stitch.fusion.memory_plan import DEFAULT_BUDGET_BYTES
from tf_stitch.fusion.planner import Plan
from tf_stitch.graph.ir import Graph, TensorRef

MAX_ON_CHIP_BUDGET = 16 * 1024 * 1024
KERNEL_SOURCES = ("cpu", "simt")
CONV_LAYOUTS = ("NHWC", "NCHW")


@dataclass
class Options:
    on_chip_budget: int = DEFAULT_BUDGET_BYTES
    # Compile kernels while outlining (off only in tests of the pass structure).
    compile: bool = True
    # The kernels' source: "cpu" (the C++ emitter), or "simt" (the CUDA emitter's source run
    # on the CPU through the SIMT emulation: a test mode, set by TF_STITCH_KERNELS=simt).
    kernel_source: str = field(default_factory=lambda: os.environ.get("TF_STITCH_KERNELS", "cpu"))
    # Also build every kernel as CUDA (a fatbin) for the op's GPU kernel.
    cuda: bool = False
    # Give every StitchedKernel its group's original ops as a `fallback` function (a converted
    # SavedModel runs them where the kernel cannot be loaded).
    fallback: bool = False
    # The bytes of one kernel's matmul tiles' right operands together (None: no bound; loop
    # bodies are optimized with cost_model.LOOP_TILE_OPERANDS_BYTES).
    tile_budget: int | None = None
    # The layout convolutions run in: "NHWC" as the graph has them (the CPU's), or "NCHW" (a
    # GPU's: see passes/nchw_layout.py).
    conv_layout: str = "NHWC"

    @property
    def gpu(self) -> bool:
        """Planned for a GPU: CUDA kernels, or a GPU's convolution layout (whose library calls
        fuse fewer activations: fusion/legality.fused_activations)."""
        return self.cuda or self.conv_layout == "NCHW"

    def __post_init__(self) -> None:
        if not isinstance(self.cuda, bool):
            raise TypeError(f"cuda must be True or False, got {self.cuda!r}")
        if self.conv_layout not in CONV_LAYOUTS:
            raise ValueError(f"conv_layout must be one of {CONV_LAYOUTS}, got {self.conv_layout!r}")
        if self.kernel_source not in KERNEL_SOURCES:
            raise ValueError(
                f"kernel source (TF_STITCH_KERNELS) must be one of {KERNEL_SOURCES}, "
                f"got {self.kernel_source!r}"
            )
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
    # The kernel as CUDA (codegen/cuda.py), or why it has none yet.
    cuda_source: str = ""
    cuda_unsupported: str = ""


@dataclass
class PassContext:
    options: Options = field(default_factory=Options)
    records: Records = field(default_factory=Records)  # every decision, each once
    kernels: list[KernelInfo] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # the messages `refuse` warned with
    plan: Plan | None = None  # the fusion plan `stitch` made for `outline`
    # What builds the kernels (`outline` needs it): the runtime's, given by optimize().
    compilers: Compilers | None = None
    # The fetches as the caller named them (passes may move them; fetch-names names them back).
    requested_outputs: list[TensorRef] = field(default_factory=list)

    def log(self, subject: str, decision: Decision) -> Decision:
        """Records a decision made after planning (fusion.siblings.Log's signature)."""
        self.records.append(Record(subject, decision))
        return decision

    def refuse(self, kind: RecordKind, subject: str, reason: str, message: str) -> None:
        """Records what could not be done (a group left to TensorFlow, a kernel that did not
        compile, ...) and warns with `message`, which tells the user so."""
        self.records.append(Record(subject, forbid(reason), kind))
        self.warn(message)

    def warn(self, message: str) -> None:
        """Warns the user with `message` (kept in `warnings` too)."""
        self.warnings.append(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


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
