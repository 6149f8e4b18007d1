"""This machine's compilers behind the passes' `codegen.compilers.Compilers`: g++ into the
kernel cache (`kernel_compiler`) and nvcc into fatbins (`cuda_compiler`)."""

from __future__ import annotations

from tf_stitch.runtime.cuda_compiler import compile_fatbin
from tf_stitch.runtime.kernel_compiler import check_loadable, compile_kernel, kernel_key


class RuntimeCompilers:
    """`codegen.compilers.Compilers` with the runtime's compilers and cache."""

    def key(self, source: str) -> str:
        return kernel_key(source)

    def cpu(self, source: str) -> str:
        compiled = compile_kernel(source)
        check_loadable(compiled.path)
        return compiled.key

    def cuda(self, source: str) -> str:
        return compile_fatbin(source).key


COMPILERS = RuntimeCompilers()
