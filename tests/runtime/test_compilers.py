"""runtime/compilers.py: the runtime's compilers behind the passes' `Compilers` interface."""

from __future__ import annotations

import pytest

from tf_stitch.codegen.compilers import Compilers, KernelCompileError
from tf_stitch.runtime.compilers import COMPILERS
from tf_stitch.runtime.kernel_compiler import kernel_key


def test_keys_are_the_kernel_caches() -> None:
    compilers: Compilers = COMPILERS  # it is the interface the outline pass takes
    source = 'extern "C" int ts_abi_version() { return 1; }\n'
    assert compilers.key(source) == kernel_key(source)
    assert compilers.key(source) != compilers.key(source + "\n")


def test_a_source_the_compiler_rejects_is_a_compile_error() -> None:
    with pytest.raises(KernelCompileError):
        COMPILERS.cpu("this is not C++;\n")
