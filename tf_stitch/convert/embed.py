"""Makes the StitchedKernel nodes of a graph self-contained: each carries the binary of its
kernel (from this machine's cache) and what CPU it was built for, and its CUDA fatbin when one
was built, besides the source and fallback function it already has.

The op uses them where its cache lacks the kernel (runtime/op/kernel_library.h): the binary when the
CPU has every feature of the one it was built on, else the source compiled on first use, else
the fallback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tensorflow.core.framework import graph_pb2

from tf_stitch.runtime import cache
from tf_stitch.runtime.kernel_compiler import cpu_signature, kernel_path

OP_NAME = "StitchedKernel"


@dataclass
class Embedded:
    """What was put into one node: sizes in bytes (0: none)."""

    node: str
    binary: int
    cuda_binary: int


def embed_binaries(graph_def: graph_pb2.GraphDef) -> list[Embedded]:
    """Adds `binary`, `binary_target` and (for CUDA builds) `cuda_binary` to every
    StitchedKernel node of `graph_def`, in place. Raises FileNotFoundError if a kernel named by
    a node is not in this machine's cache (the graph was not compiled here)."""
    done = []
    for node in _stitched_nodes(graph_def):
        key = node.attr["cache_key"].s.decode()
        binary = _read(kernel_path(key), node.name, "kernel")
        node.attr["binary"].s = binary
        node.attr["binary_target"].s = cpu_signature().encode()
        cuda = b""
        cuda_key = node.attr["cuda_key"].s.decode() if "cuda_key" in node.attr else ""
        if cuda_key:
            cuda = _read(_fatbin_path(cuda_key), node.name, "CUDA fatbin")
            node.attr["cuda_binary"].s = cuda
        done.append(Embedded(node.name, len(binary), len(cuda)))
    return done


def _stitched_nodes(graph_def: graph_pb2.GraphDef) -> list[Any]:
    nodes = [n for n in graph_def.node if n.op == OP_NAME]
    for f in graph_def.library.function:
        nodes.extend(n for n in f.node_def if n.op == OP_NAME)
    return nodes


def _fatbin_path(key: str) -> Path:
    return cache.cache_dir() / "cuda" / key[:2] / f"{key}.fatbin"


def _read(path: Path, node: str, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise FileNotFoundError(f"the {what} of {node} is not in the cache ({path}): {e}") from None
