"""The constant arguments of ops the fuser reads: reduction axes, slice windows and
transposes' permutations."""

from __future__ import annotations

from tf_stitch.graph.ir import Graph, Node
from tf_stitch.graph.values import constant_value


def reduction_axes(graph: Graph, node: Node) -> tuple[int, ...] | None:
    """Sorted non-negative axes of a reduction node, or None if they are not constant."""
    rank = graph.info(node.inputs[0]).rank
    axes = constant_value(graph, node.inputs[1]) if len(node.inputs) > 1 else None
    if axes is None or rank is None:
        return None
    flat = [int(a) for a in axes.reshape(-1)]
    if any(a < -rank or a >= rank for a in flat):
        return None
    normalized = [a % rank if rank else a for a in flat]
    if len(set(normalized)) != len(normalized):
        return None  # TensorFlow rejects duplicate axes at run time; leave that to it
    return tuple(sorted(normalized))


def slice_window(graph: Graph, node: Node) -> tuple[int, ...] | None:
    """The begin offsets of a Slice with constant bounds that cuts only axes of known size
    (whole axes of unknown size are fine), else None."""
    shape = graph.info(node.inputs[0]).shape
    begin = constant_value(graph, node.inputs[1])
    size = constant_value(graph, node.inputs[2])
    if shape is None or begin is None or size is None or len(begin) != len(shape):
        return None
    out = node.outputs[0].shape or ()
    for dim, b, s, o in zip(shape, begin, size, out, strict=True):
        whole = int(b) == 0 and (int(s) == -1 or (dim is not None and int(s) == dim))
        if not whole and (dim is None or o is None):
            return None
    return tuple(int(b) for b in begin)


def transpose_perm(graph: Graph, node: Node) -> tuple[int, ...] | None:
    """The permutation of a Transpose (output dim j is input dim perm[j]), or None if it is not
    a constant permutation of the input's axes."""
    rank = graph.info(node.inputs[0]).rank
    perm = constant_value(graph, node.inputs[1])
    if perm is None or rank is None:
        return None
    flat = tuple(int(p) for p in perm.reshape(-1))
    return flat if sorted(flat) == list(range(rank)) else None
