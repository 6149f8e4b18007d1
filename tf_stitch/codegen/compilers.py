"""The compilers as the passes see them: what building a kernel needs, not how it is done.

The outline pass turns each group's generated source into a compiled kernel, but the C++
compiler, nvcc and the kernel cache are `tf_stitch.runtime`'s, which the passes do not import
(DESIGN's one-way flow: graph -> fusion -> codegen -> runtime and passes). The pipeline is given
an implementation of `Compilers` (`runtime.compilers.COMPILERS`, passed by `optimize()`), and
the errors it raises are defined here, where both sides see them.
"""

from __future__ import annotations

from typing import Protocol


class KernelCompileError(RuntimeError):
    """A kernel (or the op library) could not be compiled; the message has the command and
    the tail of the compiler's output."""


class NvccMissing(KernelCompileError):
    """No nvcc: CUDA kernels cannot be built here (CPU kernels still are)."""


class Compilers(Protocol):
    """Builds kernels from their generated sources; each call may run a compiler, so the
    outline pass calls them once per distinct source, several at a time."""

    def key(self, source: str) -> str:
        """The cache key a C++ kernel's source is compiled under, compiling nothing."""
        ...

    def cpu(self, source: str) -> str:
        """Compiles a C++ kernel (or finds it compiled) and checks that the op can load it;
        its cache key. Raises KernelCompileError."""
        ...

    def cuda(self, source: str) -> str:
        """Compiles a CUDA kernel into a fatbin (or finds it compiled); its cache key. Raises
        NvccMissing or KernelCompileError."""
        ...
