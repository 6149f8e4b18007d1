"""A matmul tile's left operand, read in place as column segments of tensors outside the group.

`concat([x_t, h]) @ W` needs no concatenation: its columns are `x_t`'s then `h`'s, and `x_t`
(a step of a sequence, `seq[:, t]`) is itself a run of each row of `seq`. Reading through
concatenations along columns, such Slices and views that provably keep the rows, the kernel
reads the operand where it already is, and the ops that built it need not run.
"""

from __future__ import annotations

from dataclasses import dataclass

from tf_stitch.fusion.static_args import slice_window
from tf_stitch.graph.ir import Graph, Node, TensorRef
from tf_stitch.graph.values import constant_value

Dims = tuple[int | None, ...]


@dataclass(frozen=True)
class Segment:
    """Columns of a matmul's left operand read in place from a tensor whose dim 0 is the rows:
    `width` elements per row, from `offset` (of row 0) with `row_stride` between rows."""

    tensor: TensorRef
    offset: int
    row_stride: int
    width: int


class NotInPlace(Exception):
    """The operand cannot be read where it is (the message says why)."""


@dataclass
class OperandReader:
    graph: Graph
    members: set[str]  # the group's nodes: an operand they compute is not ready in time
    fed: set[TensorRef]  # fed tensors are read as they are, never through their producer

    def segments(self, ref: TensorRef, rows: int | None) -> list[Segment]:
        """`ref` (whose dim 0 is `rows`) as column segments of tensors outside the group."""
        if ref.node in self.members:
            raise NotInPlace(
                f"operand {ref} of a matmul is computed in the group; a matmul's operands "
                "must be complete before its kernel starts"
            )
        node = self.graph.nodes.get(ref.node)
        if node is not None and ref not in self.fed and not node.control_inputs:
            if node.op == "ConcatV2" and ref.index == 0:
                axis = constant_value(self.graph, node.inputs[-1])
                rank = len(self.graph.info(ref).shape or ())
                if axis is not None and rank == 2 and int(axis) % 2 == 1:
                    return [s for r in node.inputs[:-1] for s in self.segments(r, rows)]
            if keeps_rows(self.graph, node):
                return self.segments(node.inputs[0], rows)
            inner = self._slice(node, rows)
            if inner is not None:
                return inner
        shape = self.graph.info(ref).shape or ()
        row = static_product(shape[1:])
        if not shape or row is None or not same_dims(shape[:1], (rows,)):
            raise NotInPlace(f"matmul operand {ref} has no static row layout")
        return [Segment(ref, 0, row, row)]

    def _slice(self, node: Node, rows: int | None) -> list[Segment] | None:
        """A Slice that keeps all rows and one contiguous run of each, of a whole tensor."""
        if node.op != "Slice":
            return None
        begin = slice_window(self.graph, node)
        src = node.inputs[0]
        source = tuple(self.graph.info(src).shape or ())
        window = tuple(node.outputs[0].shape or ())
        if begin is None or not source or not same_dims(source[:1], (rows,)):
            return None
        if window[:1] != source[:1] or any(d is None for d in source[1:] + window[1:]):
            return None
        cut = [i for i in range(1, len(source)) if window[i] != source[i]]
        if cut and any(window[i] != 1 for i in range(1, cut[-1])):
            return None  # more than one run per row
        try:
            whole = self.segments(src, rows)
        except NotInPlace:
            return None
        if len(whole) != 1 or whole[0].width != whole[0].row_stride:
            return None
        inner = whole[0]
        strides = [static_product(source[i + 1 :]) or 0 for i in range(len(source))]
        offset = sum(int(b) * st for b, st in zip(begin[1:], strides[1:], strict=True))
        width = static_product(window[1:]) or 0
        return [Segment(inner.tensor, inner.offset + offset, inner.row_stride, width)]


def keeps_rows(graph: Graph, node: Node) -> bool:
    """A view whose dim 0 is provably its input's dim 0 (so each row keeps its elements)."""
    if not node.inputs or node.op not in ("Identity", "Squeeze", "ExpandDims", "Reshape"):
        return False
    src = graph.info(node.inputs[0]).shape
    out = node.outputs[0].shape
    if not src or not out:
        return False
    if node.op == "Identity":
        return True
    if node.op == "Squeeze":
        axes = node.attrs.get("squeeze_dims")
        items = getattr(axes, "items", ())
        return bool(items) and all(int(a) % len(src) != 0 for a in items)
    if node.op == "ExpandDims":
        axis = constant_value(graph, node.inputs[1])
        return axis is not None and int(axis) % (len(src) + 1) != 0
    return src[0] is not None and src[0] == out[0]  # a Reshape: only provable when static


def static_product(dims: Dims) -> int | None:
    n = 1
    for d in dims:
        if d is None:
            return None
        n *= d
    return n


def same_dims(a: Dims, b: Dims) -> bool:
    return len(a) == len(b) and all(x == y for x, y in zip(a, b, strict=True))
