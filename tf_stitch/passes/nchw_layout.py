"""nchw-layout: for a GPU, convolutions and the ops around them run in NCHW, and the stitched
kernels between them read and write NCHW.

On a GPU, Grappler's layout optimizer runs float32 NHWC convolutions in NCHW (cuDNN's layout
for them) and puts a transpose kernel on every tensor that crosses to an op it does not know:
a `StitchedKernel` between two convolutions would cost two transposes (ResNet-50: 36 of its
kernels). This pass does the layout optimizer's work itself, before fusion, so that the fuser
sees the transposes: every NHWC float32 Conv2D, DepthwiseConv2dNative, Conv2DBackpropInput,
MaxPool, AvgPool, FusedBatchNorm and BiasAdd becomes NCHW, the ops after them that do not care
about the layout follow (elementwise ops with their broadcast operands laid out to match, Pad,
reductions over constant axes, ConcatV2, Identity), and a Transpose is put where a tensor
crosses between the two layouts, once per tensor and direction. The fuser then reads and writes
those Transposes inside its kernels (permuted strides), and the layout optimizer, finding the
convolutions already in NCHW, adds nothing.

It runs only with `Options.conv_layout == "NCHW"` (`optimize(..., cuda=True)`). TensorFlow's CPU
kernels run these ops in NCHW through oneDNN only: where oneDNN is off (TensorFlow's default on
CPUs without AVX-512, such as AMD EPYCs, unless TF_ENABLE_ONEDNN_OPTS=1 is set before TensorFlow
is imported), convolutions and pools run NHWC only and the graph runs on a GPU alone
(`fusion/host_cpu.onednn_enabled`, `needs_nchw_host`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tf_stitch.fusion.op_kinds import OpKind, op_kind
from tf_stitch.graph.ir import AttrList, DType, Graph, Node, TensorInfo, TensorRef
from tf_stitch.graph.values import constant_value
from tf_stitch.passes.base import PassContext, graph_pass
from tf_stitch.passes.builder import NodeBuilder

TO_NCHW = (0, 3, 1, 2)  # NCHW axis j is NHWC axis TO_NCHW[j]
TO_NHWC = (0, 2, 3, 1)
# NHWC axis a sits at NCHW position _POSITION[a]
_POSITION = TO_NHWC

# Layout-sensitive ops, and which input is the image.
SENSITIVE: dict[str, int] = {
    "Conv2D": 0,
    "DepthwiseConv2dNative": 0,
    "Conv2DBackpropInput": 2,
    "MaxPool": 0,
    "AvgPool": 0,
    "FusedBatchNorm": 0,
    "FusedBatchNormV2": 0,
    "FusedBatchNormV3": 0,
    "BiasAdd": 0,
}
# Attributes holding one value per axis of the image, and the pairs-per-axis one.
_AXIS_ATTRS = ("strides", "ksize", "dilations")
_PAIR_ATTRS = ("explicit_paddings",)
_REDUCTIONS = frozenset({"Mean", "Sum", "Max", "Min", "Prod"})
_PADS = frozenset({"Pad", "PadV2", "MirrorPad"})
_IDENTITIES = frozenset({"Identity", "Snapshot", "StopGradient"})
# Readers that see a tensor's rank or element count only: the same in either layout.
_LAYOUT_FREE_READERS = frozenset({"Size", "Rank"})
# Select (v1) picks whole rows by a vector condition: not a broadcast, never converted.
_NOT_BROADCASTING = frozenset({"Select"})


@graph_pass("nchw-layout")
def nchw_layout(graph: Graph, ctx: PassContext) -> Graph:
    """Runs float32 convolutions and the layout-agnostic ops after them in NCHW (GPU target)."""
    if ctx.options.conv_layout != "NCHW":
        return graph
    if not has_nhwc_convolutions(graph):
        return graph
    out = graph.copy()
    _Converter(out).run()
    return out


# What TensorFlow's CPU kernels run in NHWC only, unless oneDNN is on.
NHWC_ONLY_WITHOUT_ONEDNN = frozenset(
    {"Conv2D", "DepthwiseConv2dNative", "Conv2DBackpropInput", "MaxPool", "AvgPool"}
)


def needs_nchw_host(graph: Graph) -> list[str]:
    """The ops of `graph` that run on this host only with oneDNN (NCHW convolutions, pools)."""
    return [n.name for n in graph if n.op in NHWC_ONLY_WITHOUT_ONEDNN and _format(n) == "NCHW"]


def has_nhwc_convolutions(graph: Graph) -> bool:
    """Whether `graph` has an op this pass would run in NCHW."""
    return any(_sensitive(graph, n) for n in graph)


def _format(node: Node) -> str:
    fmt = node.attrs.get("data_format", b"NHWC")
    return fmt.decode() if isinstance(fmt, bytes) else str(fmt)


def _rank4(graph: Graph, ref: TensorRef) -> bool:
    return graph.info(ref).rank == 4


def _sensitive(graph: Graph, node: Node) -> bool:
    image = SENSITIVE.get(node.op)
    if image is None or image >= len(node.inputs) or _format(node) != "NHWC":
        return False
    info = graph.info(node.inputs[image])
    if info.rank != 4 or info.dtype != "float32":
        return False
    if node.op.startswith("FusedBatchNorm") and node.attrs.get("is_training", True):
        return False  # training batch norm: its statistics outputs go to the optimizer
    if node.op == "Conv2DBackpropInput" and constant_value(graph, node.inputs[0]) is None:
        return False
    return all(_axis_list(node, a) is not None for a in _AXIS_ATTRS + _PAIR_ATTRS)


def _axis_list(node: Node, attr: str) -> tuple[int, ...] | None:
    """The attribute's items (empty if absent), or None if it is not a list of 4 (8) ints."""
    value = node.attrs.get(attr)
    if value is None:
        return ()
    if not isinstance(value, AttrList):
        return None
    items = tuple(int(v) for v in value.items)
    expected = 8 if attr in _PAIR_ATTRS else 4
    return items if len(items) in (0, expected) else None


def _permute(values: tuple, perm: tuple[int, ...]) -> tuple:
    return tuple(values[p] for p in perm)


def _nchw_shape(shape: tuple | None) -> tuple | None:
    return None if shape is None else _permute(shape, TO_NCHW)


@dataclass
class _Converter:
    graph: Graph
    # rank-4 tensors now held in NCHW
    converted: set[TensorRef] = field(default_factory=set)
    to_nchw: dict[TensorRef, TensorRef] = field(default_factory=dict)
    to_nhwc: dict[TensorRef, TensorRef] = field(default_factory=dict)

    def run(self) -> None:
        for node in self.graph.topological_order():
            if _sensitive(self.graph, node):
                self._convert_sensitive(node)
            elif self._follows(node):
                self._convert_follower(node)
            else:
                self._read_nhwc(node)
        outputs = self.graph.outputs
        self.graph.outputs = [self._nhwc(r) if r in self.converted else r for r in outputs]

    # -- which ops follow ------------------------------------------------------------------
    def _follows(self, node: Node) -> bool:
        data = self._data_inputs(node)
        if data is None or not any(r in self.converted for r in data):
            return False
        if node.op in _REDUCTIONS:  # its result may have any rank (see _reduction_axes)
            return self._reduction_axes(node) is not None
        if not _rank4(self.graph, node.output(0)):
            return False
        if node.op in _PADS:
            paddings = constant_value(self.graph, node.inputs[1])
            return paddings is not None and paddings.shape == (4, 2)
        if node.op == "ConcatV2":
            axis = constant_value(self.graph, node.inputs[-1])
            return axis is not None and axis.size == 1 and all(_rank4(self.graph, r) for r in data)
        return all(self._adaptable(r) for r in data)

    def _data_inputs(self, node: Node) -> list[TensorRef] | None:
        if node.op in _NOT_BROADCASTING or len(node.outputs) != 1:
            return None
        if op_kind(node.op) is OpKind.ELEMENTWISE or node.op in _IDENTITIES:
            return list(node.inputs)
        if node.op in _REDUCTIONS or node.op in _PADS:
            return node.inputs[:1]
        if node.op == "ConcatV2":
            return node.inputs[:-1]
        return None

    def _adaptable(self, ref: TensorRef) -> bool:
        """Whether an elementwise operand can be had in NCHW: a converted or rank-4 tensor
        (through a transpose), a scalar, or a lower-rank broadcast operand (a constant laid out
        again, or a reshape to rank 4 with at most one unknown size)."""
        info = self.graph.info(ref)
        if info.rank is None or info.rank > 4:
            return False
        if info.rank in (0, 4) or constant_value(self.graph, ref) is not None:
            return True
        return info.shape is not None and sum(d is None for d in info.shape) <= 1

    def _reduction_axes(self, node: Node) -> tuple[int, ...] | None:
        """The NCHW axes of a reduction over constant axes, or None if its result's axes would
        come out in another order (a reduction that keeps H or W but not both)."""
        axes = constant_value(self.graph, node.inputs[1])
        if axes is None or axes.ndim > 1:
            return None
        nhwc = sorted({int(a) % 4 for a in axes.reshape(-1)})
        if not node.attrs.get("keep_dims", False):
            kept = [_POSITION[a] for a in range(4) if a not in nhwc]
            if kept != sorted(kept):
                return None
        return tuple(sorted(_POSITION[a] for a in nhwc))

    # -- rewrites ----------------------------------------------------------------------------
    def _convert_sensitive(self, node: Node) -> None:
        image = SENSITIVE[node.op]
        inputs = list(node.inputs)
        inputs[image] = self._nchw(inputs[image])
        if node.op == "Conv2DBackpropInput":
            sizes = constant_value(self.graph, inputs[0])
            assert sizes is not None  # checked by _sensitive
            inputs[0] = self._const(node, sizes[list(TO_NCHW)], "input_sizes")
        node.inputs = inputs
        for attr in _AXIS_ATTRS:
            items = _axis_list(node, attr)
            if items:
                node.attrs[attr] = AttrList("i", _permute(items, TO_NCHW))
        for attr in _PAIR_ATTRS:
            items = _axis_list(node, attr)
            if items:
                pairs = [items[2 * a : 2 * a + 2] for a in TO_NCHW]
                node.attrs[attr] = AttrList("i", tuple(v for p in pairs for v in p))
        node.attrs["data_format"] = b"NCHW"
        self._mark_outputs(node)

    def _convert_follower(self, node: Node) -> None:
        if node.op in _REDUCTIONS:
            axes = self._reduction_axes(node)
            assert axes is not None
            axes_const = self._const(node, np.asarray(axes, np.int32), "axes")
            node.inputs = [self._nchw(node.inputs[0]), axes_const]
        elif node.op in _PADS:
            paddings = constant_value(self.graph, node.inputs[1])
            assert paddings is not None
            padded = self._const(node, paddings[list(TO_NCHW)], "paddings")
            node.inputs = [self._nchw(node.inputs[0]), padded, *node.inputs[2:]]
        elif node.op == "ConcatV2":
            axis = constant_value(self.graph, node.inputs[-1])
            assert axis is not None
            new_axis = self._const(node, axis.dtype.type(_POSITION[int(axis) % 4]), "axis")
            node.inputs = [self._nchw(r) for r in node.inputs[:-1]] + [new_axis]
        else:
            node.inputs = [self._operand(node, r) for r in node.inputs]
        self._mark_outputs(node)

    def _mark_outputs(self, node: Node) -> None:
        for i, info in enumerate(node.outputs):
            if info.rank == 4:
                node.outputs[i] = TensorInfo(info.dtype, _nchw_shape(info.shape))
                self.converted.add(node.output(i))

    def _read_nhwc(self, node: Node) -> None:
        """An op that stays NHWC reads converted tensors through a transpose back."""
        if node.op in _LAYOUT_FREE_READERS:
            return
        if any(r in self.converted for r in node.inputs):
            node.inputs = [self._nhwc(r) if r in self.converted else r for r in node.inputs]

    def _operand(self, node: Node, ref: TensorRef) -> TensorRef:
        """An elementwise operand in NCHW: see `_adaptable`."""
        if ref in self.converted:
            return ref
        info = self.graph.info(ref)
        if info.rank == 0:
            return ref
        if info.rank == 4:
            return self._nchw(ref)
        value = constant_value(self.graph, ref)
        rank = info.rank or 0
        if value is not None:
            value4 = value.reshape((1,) * (4 - rank) + value.shape)
            return self._const(node, np.transpose(value4, TO_NCHW), "operand")
        assert info.shape is not None
        full_shape = (1,) * (4 - rank) + tuple(info.shape)
        target = np.asarray([-1 if d is None else d for d in full_shape], np.int32)
        builder = NodeBuilder(self.graph, ref.node, self.graph.node(ref.node).device)
        shape_const = builder.const(target, "int32", "rank4_shape")
        attrs = {"T": DType(info.dtype), "Tshape": DType("int32")}
        ref4 = builder.op("Reshape", [ref, shape_const], TensorInfo(info.dtype, full_shape), attrs)
        return self._transpose(ref4, TO_NCHW, "to_nchw")

    def _nchw(self, ref: TensorRef) -> TensorRef:
        if ref in self.converted:
            return ref
        if ref not in self.to_nchw:
            self.to_nchw[ref] = self._transpose(ref, TO_NCHW, "to_nchw")
        return self.to_nchw[ref]

    def _nhwc(self, ref: TensorRef) -> TensorRef:
        if ref not in self.to_nhwc:
            self.to_nhwc[ref] = self._transpose(ref, TO_NHWC, "to_nhwc")
        return self.to_nhwc[ref]

    def _transpose(self, ref: TensorRef, perm: tuple[int, ...], base: str) -> TensorRef:
        info = self.graph.info(ref)
        shape = None if info.shape is None else _permute(info.shape, perm)
        builder = NodeBuilder(self.graph, ref.node, self.graph.node(ref.node).device)
        perm_const = builder.const(np.asarray(perm, np.int32), "int32", f"{base}_perm")
        attrs = {"T": DType(info.dtype), "Tperm": DType("int32")}
        out = TensorInfo(info.dtype, shape)
        return builder.op("Transpose", [ref, perm_const], out, attrs, base)

    def _const(self, node: Node, value: np.ndarray, base: str) -> TensorRef:
        builder = NodeBuilder(self.graph, node.name, node.device)
        return builder.const(value, str(np.asarray(value).dtype), f"nchw_{base}")
