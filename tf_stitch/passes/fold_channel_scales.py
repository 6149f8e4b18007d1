"""fold-channel-scales: a matmul or convolution of constant weights, scaled per output channel by
a constant (an inference batch norm's `x * s + t` after decompose-batch-norm, a Keras layer's
bias before it), computes with the scale folded into its weights.

    conv(x, W) [+ b] * s [+ t]   ->   conv(x, W * s) + (b * s + t)

What is left is a bias add of the library call, which TensorFlow's remapper fuses into it (with
an activation after it: one `_FusedConv2D` / `_FusedMatMul` launch) where the multiply-add would
otherwise be a kernel of its own. Only a value nobody else reads is rewritten: the library
call's result (and the bias add's) must have the next op of the chain as its only reader.
"""

from __future__ import annotations

import numpy as np

from tf_stitch.graph.guards import Guard
from tf_stitch.graph.ir import DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder

_ADDS = ("Add", "AddV2", "BiasAdd")


@graph_pass("fold-channel-scales")
def fold_channel_scales(graph: Graph, ctx: PassContext) -> Graph:
    """Folds constant per-channel scales of matmul/convolution results into their weights."""
    out = graph.copy()
    # Readers of the chains' values: a chain is rewritten whole, so no other chain's readers
    # change (its library call's output keeps its readers).
    readers = out.consumers()
    guard = Guard(out)
    for node in list(out):
        if node.name in out and _weights(out, guard, node) is not None:
            _fold(out, guard, node, readers)
    return out


def _weights(graph: Graph, guard: Guard, node: Node) -> np.ndarray | None:
    """The constant float32 weights of a matmul or NHWC convolution whose output channels are
    its last axis, else None."""
    if node.op not in ("MatMul", "Conv2D", "DepthwiseConv2dNative") or not guard.rewritable(node):
        return None
    if node.op != "MatMul" and node.attrs.get("data_format", b"NHWC") not in (b"NHWC", "NHWC"):
        return None
    if node.op == "MatMul" and node.attrs.get("transpose_a", False):
        return None
    if node.outputs[0].dtype != "float32" or node.inputs[1].node in guard.fed:
        return None
    weights = constant_value(graph, node.inputs[1])
    return None if weights is None or weights.dtype != np.float32 else weights


Readers = dict[TensorRef, list[str]]


def _fold(graph: Graph, guard: Guard, lib: Node, readers: Readers) -> None:
    channels = lib.outputs[0].shape[-1] if lib.outputs[0].shape else None
    if channels is None:
        return

    def step(ref: TensorRef, ops: tuple[str, ...]) -> tuple[Node | None, np.ndarray | None]:
        if ref.node in guard.ordered:
            return None, None
        return _constant_operand(graph, ref, readers.get(ref, []), ops, channels)

    bias_node, bias = step(lib.output(0), _ADDS)
    after_bias = bias_node.output(0) if bias_node is not None else lib.output(0)
    mul, scale = step(after_bias, ("Mul",))
    if mul is None or scale is None:
        return
    shift_node, shift = step(mul.output(0), _ADDS)
    weights = _weights(graph, guard, lib)
    assert weights is not None
    folded = _scaled(lib, weights, scale)
    offset = (bias * scale if bias is not None else 0.0) + (shift if shift is not None else 0.0)
    last = shift_node or mul
    b = NodeBuilder(graph, lib.name, lib.device)
    lib.inputs[1] = b.const(folded, "float32", "folded_weights")
    replacement = lib.output(0)
    if bias is not None or shift is not None:
        offset_ref = b.const(np.asarray(offset, np.float32).reshape(channels), "float32", "bias")
        replacement = b.op(
            "AddV2",
            [lib.output(0), offset_ref],
            TensorInfo("float32", last.outputs[0].shape),
            {"T": DType("float32")},
            base="folded_bias",
        )
    graph.replace_uses(last.output(0), replacement)
    graph.remove([n.name for n in (bias_node, mul, shift_node) if n is not None])


def chain_operand(
    graph: Graph, ref: TensorRef, readers: list[str], ops: tuple[str, ...]
) -> tuple[Node, TensorRef] | None:
    """The next link of a library call's per-channel chain: the only reader of `ref` (not a
    fetched tensor) if it is one of `ops`, keeps `ref`'s shape and has one other operand, and
    that operand; else None."""
    if len(readers) != 1 or ref in graph.fetched():
        return None
    node = graph.node(readers[0])
    if node.op not in ops or node.control_inputs or len(node.inputs) != 2:
        return None
    if node.op == "BiasAdd" and (
        node.inputs[0] != ref or node.attrs.get("data_format", b"NHWC") not in (b"NHWC", "NHWC")
    ):
        return None  # an NCHW bias is not per output channel of an NHWC result
    other = node.inputs[1] if node.inputs[0] == ref else node.inputs[0]
    if other == ref or node.outputs[0].shape != graph.info(ref).shape:
        return None  # the operand broadcasts the result to another shape
    return node, other


def _constant_operand(
    graph: Graph, ref: TensorRef, readers: list[str], ops: tuple[str, ...], channels: int
) -> tuple[Node | None, np.ndarray | None]:
    """The only reader of `ref` if it is one of `ops` with a constant per-channel (or scalar)
    other operand, and that operand as a [channels] vector; else (None, None)."""
    link = chain_operand(graph, ref, readers, ops)
    if link is None:
        return None, None
    node, other = link
    value = constant_value(graph, other)
    if value is None or value.dtype != np.float32:
        return None, None
    if value.size not in (1, channels) or any(d != 1 for d in value.shape[:-1]):
        return None, None
    return node, np.broadcast_to(value.reshape(-1), (channels,)).astype(np.float32)


def _scaled(lib: Node, weights: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The weights with output channel c multiplied by scale[c]."""
    if lib.op == "MatMul":
        axis_scale = scale[:, None] if lib.attrs.get("transpose_b", False) else scale[None, :]
        return (weights * axis_scale).astype(np.float32)
    if lib.op == "Conv2D":  # [H, W, I, O]
        return (weights * scale).astype(np.float32)
    i, m = weights.shape[2:]  # DepthwiseConv2dNative [H, W, I, M]: output channel k * m + j
    return (weights * scale.reshape(1, 1, i, m)).astype(np.float32)
