"""Small helpers to add typed nodes to a graph under one name scope and device."""

from __future__ import annotations

from typing import Any

import numpy as np

from tf_stitch.graph.ir import DType, Graph, Node, Shape, TensorInfo, TensorRef, TensorValue


class NodeBuilder:
    def __init__(self, graph: Graph, scope: str, device: str = "") -> None:
        self.graph = graph
        self.scope = scope
        self.device = device

    def _name(self, base: str) -> str:
        return self.graph.unique_name(f"{self.scope}/{base}")

    def const(self, value: Any, dtype: str, base: str = "const") -> TensorRef:
        arr = np.asarray(value, dtype=_np_dtype(dtype))
        node = Node(
            self._name(base),
            "Const",
            attrs={"value": TensorValue(arr, dtype), "dtype": DType(dtype)},
            outputs=[TensorInfo(dtype, tuple(arr.shape))],
            device=self.device,
        )
        return self.graph.add(node).output(0)

    def op(
        self,
        op: str,
        inputs: list[TensorRef],
        out: TensorInfo,
        attrs: dict[str, Any] | None = None,
        base: str | None = None,
        name: str | None = None,
    ) -> TensorRef:
        node = Node(
            name or self._name(base or op),
            op,
            list(inputs),
            dict(attrs or {}),
            [out],
            device=self.device,
        )
        return self.graph.add(node).output(0)

    def binary(
        self,
        op: str,
        a: TensorRef,
        b: TensorRef,
        shape: Shape,
        dtype: str = "float32",
        name: str | None = None,
    ) -> TensorRef:
        return self.op(op, [a, b], TensorInfo(dtype, shape), {"T": DType(dtype)}, name=name)

    def unary(
        self, op: str, a: TensorRef, shape: Shape, dtype: str = "float32", name: str | None = None
    ) -> TensorRef:
        return self.op(op, [a], TensorInfo(dtype, shape), {"T": DType(dtype)}, name=name)

    def reduce(
        self,
        op: str,
        a: TensorRef,
        axes: list[int],
        shape: Shape,
        keep_dims: bool = True,
        dtype: str = "float32",
    ) -> TensorRef:
        axis = self.const(np.asarray(axes, dtype=np.int32), "int32", base=f"{op.lower()}_axes")
        attrs = {"T": DType(dtype), "Tidx": DType("int32"), "keep_dims": keep_dims}
        return self.op(op, [a, axis], TensorInfo(dtype, shape), attrs)


def keepdims_shape(shape: Shape, axes: list[int]) -> Shape:
    if shape is None:
        return None
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _np_dtype(dtype: str) -> Any:
    import tensorflow as tf

    return tf.as_dtype(dtype).as_numpy_dtype


def replace_with_reshape(graph: Graph, node: Node) -> bool:
    """Turns `node` (a view of its first input) into a Reshape to its own output shape, keeping
    its name and outputs; False (and nothing changed) if two or more sizes are unknown."""
    shape = node.outputs[0].shape
    if shape is None or sum(d is None for d in shape) > 1:
        return False
    target = np.asarray([-1 if d is None else d for d in shape], np.int32)
    const = NodeBuilder(graph, node.name, node.device).const(target, "int32", "view_shape")
    graph.nodes[node.name] = Node(
        node.name,
        "Reshape",
        [node.inputs[0], const],
        {"T": node.attrs["T"], "Tshape": DType("int32")},
        list(node.outputs),
        device=node.device,
    )
    return True
