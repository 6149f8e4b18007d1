"""The text `Converter.summary()` prints: every StitchedKernel, then totals per signature."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from tf_stitch.convert.signature import ConvertedSignature
from tf_stitch.graph.names import common_scope


def _split(ranks: Sequence[int], dims: Sequence[int]) -> list[str]:
    shapes, at = [], 0
    for rank in ranks:
        part = dims[at : at + rank]
        at += rank
        shapes.append("[" + ", ".join(str(d) if d >= 0 else f"s{-1 - d}" for d in part) + "]")
    return shapes


def _tensors(names: Sequence[str], types: Sequence[Any], shapes: Sequence[str]) -> list[str]:
    return [f"{n} {tf.as_dtype(t).name}{s}" for n, t, s in zip(names, types, shapes, strict=True)]


def format_kernel(c: ConvertedSignature, info: Any, node: Any) -> list[str]:
    attr = node.attr
    targets = ["cpu"] + (["cuda"] if attr["cuda_key"].s else [])
    ins = _split(list(attr["input_ranks"].list.i), list(attr["input_dims"].list.i))
    outs = _split(list(attr["output_ranks"].list.i), list(attr["output_dims"].list.i))
    binary = len(attr["binary"].s)
    cuda = len(attr["cuda_binary"].s) if "cuda_binary" in attr else 0
    fallback = [f.name for f in attr["fallback"].list.func] if "fallback" in attr else []
    scope = common_scope(info.members)
    members = ", ".join(m[len(scope) :] for m in info.members)
    lines = [
        f"  kernel {info.node} ({info.schedule})",
        f"    {len(info.members)} ops" + (f" under {scope}" if scope else "") + f": {members}",
        "    inputs:  " + "; ".join(_tensors(info.inputs, attr["Tin"].list.type, ins)),
        "    outputs: " + "; ".join(_tensors(info.outputs, attr["Tout"].list.type, outs)),
        f"    targets: {', '.join(targets)}; carries a {binary:,}-byte CPU binary"
        + (f" and a {cuda:,}-byte CUDA fatbin" if cuda else "")
        + (f"; fallback {fallback[0]}" if fallback else "; no fallback"),
    ]
    return lines


def format_summary(converted: Sequence[ConvertedSignature]) -> str:
    lines = []
    for c in converted:
        if c.same_as is not None:
            lines.append(
                f"signature {c.key!r}: the same function as {c.same_as!r} (converted and "
                "saved once, under both keys)"
            )
            continue
        nodes = {n.name: n for n in c.graph_def.node}
        kernels = c.context.kernels
        members = sum(len(k.members) for k in kernels)
        lines.append(f"signature {c.key!r}: inputs {', '.join(_spec(c, n) for n in c.input_names)}")
        for info in kernels:
            lines.extend(format_kernel(c, info, nodes[info.node]))
        lines.append(
            f"  {len(kernels)} kernels replace {members} ops; ops in the graph "
            f"{c.ops_before} -> {c.ops_after} (Const/Identity/NoOp/Placeholder left out)"
        )
        if c.launches is not None:
            before, after = c.launches
            lines.append(f"  kernels per step (measured): {before} -> {after}")
        else:
            lines.append("  kernels per step: not measured (run build(input_fn) to measure)")
        if c.max_abs_diff is not None:
            seen = len(c.shapes_seen)
            lines.append(
                f"  checked against the original on {seen} batch(es): max abs diff "
                f"{c.max_abs_diff:.3g}"
            )
        lines.extend(f"  warning: {w}" for w in c.context.warnings)
    return "\n".join(lines)


def _spec(c: ConvertedSignature, name: str) -> str:
    spec = c.specs[name]
    return f"{name} {spec.dtype.name}{spec.shape}"
