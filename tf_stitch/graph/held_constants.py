"""Which weights of an optimized graph TensorFlow is given by reference, not as constants.

A function whose GraphDef carries its weights as `Const` nodes costs TensorFlow a copy of every
weight each time it imports, serializes or optimizes the function: a BERT-base's 440 MB took
8-11 s to wrap as a function and 27 s more in its first call (Grappler over the constants),
against 0.4 s for both with the weights held by reference (captured tensors). Convolution
filters stay constants: oneDNN caches a constant filter in its blocked layout, and a ResNet-50
with captured filters ran ~20% slower (a reorder of every filter in every call, as TensorFlow's
own variables cost). Matmul weights showed no such difference.
"""

from __future__ import annotations

import numpy as np

from tf_stitch.graph.ir import Graph, TensorValue

# Constants smaller than this (64 KiB of float32) stay in the graph: biases, scales, shapes.
HELD_ELEMENTS = 16384
# Ops whose filter operand oneDNN caches when it is a constant.
_FILTER_OPS = frozenset(
    {
        "Conv2D",
        "Conv3D",
        "DepthwiseConv2dNative",
        "Conv2DBackpropInput",
        "_FusedConv2D",
        "_FusedDepthwiseConv2dNative",
    }
)


def held_constants(graph: Graph) -> dict[str, TensorValue]:
    """Node name -> value of every constant to give TensorFlow by reference: at least
    HELD_ELEMENTS elements, no control inputs (a constant inside a lowered loop's frame must
    stay there) and read by no convolution."""
    filters: set[str] = set()
    for node in graph:
        if node.op in _FILTER_OPS:
            filters.update(ref.node for ref in node.inputs)
    held: dict[str, TensorValue] = {}
    for node in graph:
        value = node.attrs.get("value")
        if (
            node.op == "Const"
            and isinstance(value, TensorValue)
            and not node.control_inputs
            and node.name not in filters
            and value.dtype != "string"
            and np.size(value.array) >= HELD_ELEMENTS
        ):
            held[node.name] = value
    return held
