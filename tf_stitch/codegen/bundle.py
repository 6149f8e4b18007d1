"""A bundle: independent elementwise kernels run as one kernel (fusion/bundles.py chooses them).

Each member keeps the code its own kernel would have, as a function of the bundle's source:

- C++: `ts_m<i>`, the member's `ts_run` (static); the bundle's `ts_run` takes rows of all
  members laid end to end (member 0's rows first) and hands each member its part of the range,
  so the op's thread pool splits the bundle's rows as it splits any kernel's;
- CUDA: `ts_m<i>`, the member's kernel as a `__device__` function; the bundle's `__global__`
  function calls them one after another, every thread striding over each member's elements in
  turn (members write disjoint outputs and read none of each other's, so no barrier is needed
  between them); the grid is sized to the bundle's elements.

Members have static shapes (no run-time sizes), run one thread per element (`flat_elements`)
and read no tables by index. The bundle's inputs are its members' without repeats; its outputs
are theirs in order.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass

from tf_stitch.codegen.c_tables import (
    ABI_VERSION,
    CTYPE,
    RUN_PARAMETERS,
    has_double,
    has_half,
    has_int,
    header,
)
from tf_stitch.codegen.cstyle import Emitter
from tf_stitch.codegen.cuda import CudaEmitter
from tf_stitch.codegen.cuda_head import (
    cuda_preamble,
    flat_elements,
    gathers,
    kernel_arguments,
    signature,
)
from tf_stitch.codegen.kernel_ir import Kernel, Param
from tf_stitch.codegen.simt import EMULATED_BLOCKS, EMULATED_THREADS
from tf_stitch.codegen.sizes import static
from tf_stitch.graph.ir import TensorRef

_NAME_TOKEN = "__tf_stitch_bundle__"


def bundleable(kernel: Kernel) -> bool:
    """A kernel a bundle can hold: one thread per element, every size static, no gathers."""
    params = kernel.inputs + kernel.outputs
    return (
        flat_elements(kernel)
        and not kernel.symbols
        and not kernel.lanes
        and kernel.block_rows == 1
        and not gathers(kernel)
        and all(isinstance(s, int) for s in kernel.domain)
        and all(d is not None for p in params for d in p.dims)
    )


@dataclass(frozen=True)
class Bundle:
    """`kernel` describes the bundle to the op (its inputs, outputs, rows and grid);
    `members` are the kernels it runs, `inputs[i][j]` the bundle input that is member i's
    input j, `rows[i]` member i's rows."""

    kernel: Kernel
    members: list[Kernel]
    inputs: list[list[int]]
    rows: list[int]


def bundle(name: str, members: list[Kernel]) -> Bundle:
    """The bundle of `members` (each `bundleable`), named `name`."""
    index: dict[TensorRef, int] = {}  # tensor -> its bundle input
    inputs: list[Param] = []
    maps: list[list[int]] = []
    for m in members:
        for p in m.inputs:
            if p.tensor not in index:
                index[p.tensor] = len(inputs)
                inputs.append(dataclasses.replace(p, index=len(inputs), name=f"b_in{len(inputs)}"))
        maps.append([index[p.tensor] for p in m.inputs])
    outputs = [
        dataclasses.replace(p, index=i, name=f"b_out{i}")
        for i, p in enumerate(p for m in members for p in m.outputs)
    ]
    rows = [math.prod(static(s) for s in m.outer) for m in members]
    total = sum(rows)
    elements = sum(
        r * math.prod(static(s) for s in m.inner) for r, m in zip(rows, members, strict=True)
    )
    kernel = Kernel(
        name=name,
        domain=(total, max(1, math.ceil(elements / max(total, 1)))),
        split=1,
        inputs=inputs,
        outputs=outputs,
        schedule=_schedule(members),
        members=[n for m in members for n in m.members],
        unit_cost=max(m.unit_cost for m in members),
    )
    return Bundle(kernel, members, maps, rows)


def _schedule(members: list[Kernel], shown: int = 4) -> str:
    """ "bundle of N kernels: " and the first members' schedules."""
    listed = " | ".join(m.schedule for m in members[:shown])
    more = f" | ... ({len(members) - shown} more)" if len(members) > shown else ""
    return f"bundle of {len(members)} kernels: {listed}{more}"


def emit_cpu_bundle(b: Bundle) -> str:
    """The C++ source of the bundle's kernel library."""
    lines = [f"// tf_stitch kernel: {b.kernel.schedule}", *Emitter(b.members[0]).preamble()[1:]]
    for i, m in enumerate(b.members):
        lines += Emitter(m, function=f"ts_m{i}").source().splitlines()
    lines += [f'extern "C" void ts_run({RUN_PARAMETERS}) {{']
    first = 0
    out = 0
    for i, m in enumerate(b.members):
        ins = ", ".join(f"ts_in[{j}]" for j in b.inputs[i]) or "nullptr"
        outs = ", ".join(f"ts_out[{out + j}]" for j in range(len(m.outputs)))
        last = first + b.rows[i]
        lines += [
            "  {",
            f"    const void* in[] = {{{ins}}};",
            f"    void* out[] = {{{outs}}};",
            f"    const int64_t b = ts_begin > {first} ? ts_begin - {first} : 0;",
            f"    const int64_t e = (ts_end < {last} ? ts_end : {last}) - {first};",
            f"    if (b < e) ts_m{i}(in, out, ts_sym, b, e);",
            "  }",
        ]
        first, out = last, out + len(m.outputs)
    lines += ["}"]
    return "\n".join(lines) + "\n"


def _cuda(b: Bundle, name: str) -> str:
    lines = [
        f"// tf_stitch kernel (CUDA): {b.kernel.schedule}",
        *cuda_preamble(
            half=any(map(has_half, b.members)),
            double=any(map(has_double, b.members)),
            integer=any(map(has_int, b.members)),
        ),
    ]
    for i, m in enumerate(b.members):
        lines += CudaEmitter(m, function=f"ts_m{i}").source().splitlines()
    lines += signature(kernel_arguments(b.kernel), name)
    lines += ["  (void)ts_first;", "  (void)ts_units;"]
    out = 0
    for i, m in enumerate(b.members):
        args = [f"b_in{j}" for j in b.inputs[i]]
        args += [f"b_out{out + j}" for j in range(len(m.outputs))]
        lines.append(f"  ts_m{i}({', '.join([*args, '0', str(b.rows[i])])});")
        out += len(m.outputs)
    lines += ["}"]
    return "\n".join(lines) + "\n"


def content_named_cuda_bundle(b: Bundle) -> tuple[str, str]:
    """(source, `__global__` function name) of the bundle's CUDA build, named after the source
    (as `cuda.content_named_cuda` names a kernel's)."""
    source = _cuda(b, _NAME_TOKEN)
    name = "ts_" + hashlib.sha256(source.encode()).hexdigest()[:16]
    return source.replace(_NAME_TOKEN, name), name


def emulated_bundle_source(b: Bundle) -> str:
    """The bundle's CUDA source as a CPU kernel library through the SIMT emulation
    (`TF_STITCH_KERNELS=simt`): the range holding row 0 launches the whole bundle once."""
    k = b.kernel
    args = [f"static_cast<const {CTYPE[p.dtype]}*>(ts_in[{p.index}])" for p in k.inputs]
    args += [f"static_cast<{CTYPE[p.dtype]}*>(ts_out[{p.index}])" for p in k.outputs]
    args += ["0", str(sum(b.rows))]
    abi = [
        f'extern "C" int ts_abi_version(void) {{ return {ABI_VERSION}; }}',
        "",
        f'extern "C" void ts_run({RUN_PARAMETERS}) {{',
        "  (void)ts_sym;",
        "  (void)ts_end;",
        "  if (ts_begin != 0) return;  // one launch runs every member's elements",
        f"  ts_emu::launch({EMULATED_BLOCKS}, {EMULATED_THREADS}, [&] {{",
        f"    {k.name}({', '.join(args)});",
        "  });",
        "}",
    ]
    return "\n".join([header("simt_emu.h"), _cuda(b, k.name), *abi]) + "\n"
