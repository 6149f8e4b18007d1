"""Makes an optimized GraphDef runnable on this machine: compiles each kernel's source here."""

from __future__ import annotations

from typing import Any

from tf_stitch.graph.io import GraphDef, graph_from_graph_def, graph_to_graph_def
from tf_stitch.runtime import op_library
from tf_stitch.runtime.kernel_compiler import check_loadable, compile_kernel

OP_NAME = "StitchedKernel"


def ensure_compiled(graph_def: Any) -> GraphDef:
    """Compiles the kernel of every StitchedKernel node (from the source it carries) into this
    machine's cache and returns a copy of `graph_def` whose `cache_key` attributes name them.

    Kernels are built for the machine that runs them (`-march=native`), so a graph optimized
    elsewhere, or a cache that was cleared, needs this once. Raises KernelCompileError if a
    kernel cannot be built.
    """
    op_library.load()
    graph = graph_from_graph_def(graph_def)
    for node in graph:
        if node.op != OP_NAME:
            continue
        source = node.attrs["source"]
        compiled = compile_kernel(source.decode() if isinstance(source, bytes) else str(source))
        check_loadable(compiled.path)
        node.attrs["cache_key"] = compiled.key.encode()
    return graph_to_graph_def(graph)
