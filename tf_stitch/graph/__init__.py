"""The IR every pass shares, and the only code that touches GraphDef protos."""

from tf_stitch.graph.ir import (
    AttrList,
    DType,
    FuncRef,
    Graph,
    Node,
    RawAttr,
    Shape,
    ShapeValue,
    TensorInfo,
    TensorRef,
    TensorValue,
)

__all__ = [
    "AttrList",
    "DType",
    "FuncRef",
    "Graph",
    "Node",
    "RawAttr",
    "Shape",
    "ShapeValue",
    "TensorInfo",
    "TensorRef",
    "TensorValue",
]
