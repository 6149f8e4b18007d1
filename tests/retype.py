"""A float32 test graph in another float dtype: every float32 tensor of a frozen function's
GraphDef made float16, bfloat16 or float64 (placeholders, op type attributes, constants
converted), so that each numerics case runs unchanged in every dtype.

`Retyped.run` runs a GraphDef (the retyped original, or tf_stitch's optimization of it) as
TensorFlow does; `Retyped.unsupported` says why TensorFlow itself cannot run the case in that
dtype on this CPU (no kernel registered), where it cannot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import graph_pb2
from tensorflow.python.framework.convert_to_constants import (
    convert_variables_to_constants_v2,
)


@dataclass
class Retyped:
    graph_def: graph_pb2.GraphDef
    inputs: list[str]  # tensor names fed, in the signature's order
    outputs: list[str]  # tensor names fetched, in the function's order
    dtypes: list[tf.DType]  # of the inputs, after retyping

    def run(self, graph_def: graph_pb2.GraphDef, xs: list[tf.Tensor]) -> list[np.ndarray]:
        def imported() -> None:
            tf.graph_util.import_graph_def(graph_def, name="")

        wrapped = tf.compat.v1.wrap_function(imported, [])
        g = wrapped.graph
        fn = wrapped.prune(
            [g.as_graph_element(n) for n in self.inputs],
            [g.as_graph_element(n) for n in self.outputs],
        )
        # (flat first: numpy makes no array of a 0-d bfloat16 tensor)
        return [tf.reshape(t, [-1]).numpy().reshape(t.shape) for t in fn(*xs)]


def retype(fn: Callable[..., Any], signature: list[tf.TensorSpec], dtype: tf.DType) -> Retyped:
    """`fn` traced with `signature` and frozen, its float32 tensors made `dtype`."""
    concrete = tf.function(fn, input_signature=signature).get_concrete_function()
    frozen = convert_variables_to_constants_v2(concrete)
    graph_def = retype_graph_def(frozen.graph.as_graph_def(), tf.float32, dtype)
    inputs = [t.name for t in frozen.inputs]
    outputs = [t.name for t in frozen.outputs]
    dtypes = [dtype if s.dtype == tf.float32 else s.dtype for s in signature]
    return Retyped(graph_def, inputs, outputs, dtypes)


def retype_graph_def(
    original: graph_pb2.GraphDef, source: tf.DType, dtype: tf.DType
) -> graph_pb2.GraphDef:
    """A copy of `original` with its `source` tensors made `dtype` (constants rounded to
    nearest)."""
    graph_def = graph_pb2.GraphDef()
    graph_def.CopyFrom(original)
    before, target = source.as_datatype_enum, dtype.as_datatype_enum
    # a 16-bit batch norm's scale, offset and statistics stay float32 (its U), and what
    # computes them
    statistics: set[str] = set()
    if dtype in (tf.float16, tf.bfloat16):
        nodes = {node.name: node for node in graph_def.node}
        stack = [
            i.split(":")[0]
            for node in graph_def.node
            if node.op.startswith("FusedBatchNorm")
            for i in node.input[1:5]
        ]
        while stack:
            name = stack.pop().lstrip("^")
            if name not in statistics:
                statistics.add(name)
                stack.extend(i.split(":")[0] for i in nodes[name].input)
    for node in graph_def.node:
        if node.name in statistics:
            continue
        for key, attr in node.attr.items():
            if key == "U" and dtype in (tf.float16, tf.bfloat16):
                continue
            if attr.HasField("type") and attr.type == before:
                attr.type = target
            if attr.HasField("list") and before in attr.list.type:
                attr.list.type[:] = [target if t == before else t for t in attr.list.type]
        if node.op == "Const" and node.attr["value"].tensor.dtype == before:
            value = tf.cast(tf.make_ndarray(node.attr["value"].tensor), dtype)  # to nearest
            # (flat: a 0-d bfloat16 array is not one numpy makes a proto of)
            proto = tf.make_tensor_proto(value.numpy().reshape(-1), shape=value.shape)
            node.attr["value"].tensor.CopyFrom(proto)
    return graph_def
