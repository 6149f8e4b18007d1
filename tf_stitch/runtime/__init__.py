"""The StitchedKernel op, its build, and the compiled-kernel cache."""

from tf_stitch.runtime.ensure import ensure_compiled

__all__ = ["ensure_compiled"]
