"""codegen/lower_parts.py: strides over a domain and call attributes, the parts both lowerers
share (symbolic sizes: test_sizes.py)."""

from __future__ import annotations

from tf_stitch.codegen.lower_parts import call_attrs, tensor_strides
from tf_stitch.codegen.sizes import dim
from tf_stitch.graph.ir import DType, Node, TensorInfo


def test_row_major_strides_with_an_unknown_dim() -> None:
    assert tensor_strides((2, 3, 4), (2, 3, 4)) == [12, 4, 1]
    # the batch unknown: its size comes from the domain (a kernel argument)
    assert tensor_strides((None, 8), (dim("D0"), 8)) == [8, 1]
    strides = tensor_strides((4, None, 2), (4, dim("D1"), 2))
    assert strides[1:] == [2, 1] and str(strides[0]) == "2*D1"


def test_call_attrs_are_what_an_expression_needs() -> None:
    def node(op: str, **attrs: object) -> Node:
        return Node("n", op, [], dict(attrs), [TensorInfo("float32", (2,))])

    assert call_attrs(node("LeakyRelu", alpha=0.1)) == (("alpha", 0.1),)
    assert call_attrs(node("LeakyRelu")) == (("alpha", 0.2),)  # TensorFlow's default
    cast = node("Cast", SrcT=DType("int32"), DstT=DType("float16"))
    assert call_attrs(cast) == (("src", "int32"), ("dst", "float16"))
    assert call_attrs(node("AddV2", T=DType("int64"))) == (("T", "int64"),)
    assert call_attrs(node("AddV2", T=DType("float32"))) == ()
