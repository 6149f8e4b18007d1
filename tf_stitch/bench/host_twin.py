"""The GPU plan's twin for a host: its NCHW convolutions run NHWC between two transposes, so
that the plan can be run and traced on a CPU in reasonable time, to count its launches.

TensorFlow's CPU kernels run NCHW convolutions only through oneDNN, and oneDNN runs a float32
NCHW convolution with HWIO filters (TensorFlow's) with its reference kernel: measured on the
AMD EPYC VM, a 64 -> 64 3x3 convolution over 56x56 takes 3.3 s in NCHW and 11 ms in NHWC
(`ONEDNN_VERBOSE=1` names `ref:any` and `x64:gemm:jit`). One traced run of the GPU plan of a
VGG16 or a ResNet-152 took more than 8 minutes.

In the twin each NCHW convolution keeps its name and inputs but reads its image through a
transpose to NHWC, and its readers read its result through a transpose back to NCHW. Every
other node is the plan's own, with the plan's name. The twin's transposes are named under
`<convolution>/host_twin/` (`is_twin_node`): the counter leaves them out, and the GPU model
looks each convolution up in the plan itself, so it counts the NCHW convolution a GPU runs.
The transposes take their permutations from variables, not constants, so that Grappler cannot
fold a twin transpose into a transpose of the plan (which would remove the plan's from the
run); reading a variable launches no kernel (`NO_KERNEL_OPS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tf_stitch.graph.ir import AttrList, DType, Graph, Node, ShapeValue, TensorInfo, TensorRef
from tf_stitch.passes.nchw_layout import TO_NCHW, TO_NHWC

SCOPE = "host_twin"
# The convolutions whose image is input 0 and result output 0, and whose other inputs do not
# depend on the layout (filters, and per-channel vectors for the fused ones).
CONVOLUTIONS = frozenset(
    {"Conv2D", "_FusedConv2D", "DepthwiseConv2dNative", "_FusedDepthwiseConv2dNative"}
)
# The epilogue ops Grappler's remapper fuses into a convolution on a CPU.
_LAYOUT_OPS = frozenset({"BiasAdd", "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"})
ACTIVATIONS = frozenset({"Relu", "Relu6", "Elu", "LeakyRelu", "Tanh", "Sigmoid"})
_PERMS = {"to_nhwc": TO_NHWC, "to_nchw": TO_NCHW}
_AXIS_ATTRS = ("strides", "dilations")


def is_twin_node(name: str) -> bool:
    """Whether a node (by name, in any name scope) is one the twin added."""
    return f"/{SCOPE}/" in f"/{name}"


def host_twin(graph: Graph) -> tuple[Graph, dict[str, np.ndarray], int]:
    """The twin of `graph`, the Placeholders that stand for its permutations (node name ->
    value: make each a variable), and how many convolutions it moved to NHWC. A convolution
    whose fused arguments are not all per-channel vectors (a fused residual add) stays NCHW."""
    twin = graph.copy()
    convolutions = [node for node in twin if _movable(twin, node)]
    if not convolutions:
        return twin, {}, 0
    perms = {key: _placeholder(twin, f"{SCOPE}/{key}_perm") for key in _PERMS}
    consumers = twin.consumers()
    chains = [_chain(twin, conv, consumers) for conv in convolutions]
    # Readers first (the consumers as the plan has them), then images: a convolution that
    # reads another reads its transpose back to NCHW, through a transpose to NHWC.
    for chain in chains:
        for node in chain:
            nchw = node.outputs[0]
            node.outputs[0] = TensorInfo(nchw.dtype, _permuted(nchw.shape, TO_NHWC))
        last = chain[-1].output(0)
        out = _transpose(twin, chain[0], last, "to_nchw", perms["to_nchw"])
        for reader in consumers.get(last, []):
            consumer = twin.node(reader)
            consumer.inputs = [out if r == last else r for r in consumer.inputs]
        twin.outputs = [out if r == last else r for r in twin.outputs]
    for chain in chains:
        conv = chain[0]
        conv.inputs[0] = _transpose(twin, conv, conv.inputs[0], "to_nhwc", perms["to_nhwc"])
        for node in chain:
            _to_nhwc_attrs(node)
    values = {perms[key]: np.asarray(perm, np.int32) for key, perm in _PERMS.items()}
    return twin, values, len(convolutions)


def _chain(graph: Graph, conv: Node, consumers: Mapping[TensorRef, list[str]]) -> list[Node]:
    """`conv` and the epilogue Grappler's remapper may fuse into it (a bias add or inference
    batch norm, then activations), each the only reader of the one before: they move to NHWC
    with it, so that the remapper fuses them on the host as it does in NCHW."""
    chain = [conv]
    while True:
        ref = chain[-1].output(0)
        readers = consumers.get(ref, [])
        if len(readers) != 1 or ref in graph.outputs:
            return chain
        node = graph.node(readers[0])
        if not node.inputs or node.inputs[0] != ref or ref in node.inputs[1:]:
            return chain
        if node.op in _LAYOUT_OPS and node.attrs.get("data_format") == b"NCHW":
            if any(consumers.get(node.output(i)) for i in range(1, len(node.outputs))):
                return chain
        elif node.op not in ACTIVATIONS:
            return chain
        chain.append(node)


def twin_variables(perms: Mapping[str, np.ndarray]) -> tuple[dict[str, Any], list[Any]]:
    """Placeholder name -> resource handle for `perms` (to join the function's live
    variables), and the variables themselves (keep them alive while the twin runs)."""
    import tensorflow as tf

    made = [tf.Variable(value, trainable=False) for value in perms.values()]
    return {name: v.handle for name, v in zip(perms, made, strict=True)}, made


def _movable(graph: Graph, node: Node) -> bool:
    if node.op not in CONVOLUTIONS or node.attrs.get("data_format") != b"NCHW":
        return False
    if len(node.outputs) != 1 or graph.info(node.inputs[0]).rank != 4:
        return False
    # a fused op's arguments (bias, batch norm): per-channel vectors only
    return all(graph.info(ref).rank == 1 for ref in node.inputs[2:])


def _to_nhwc_attrs(node: Node) -> None:
    if "data_format" in node.attrs:
        node.attrs["data_format"] = b"NHWC"
    for key in _AXIS_ATTRS:
        value = node.attrs.get(key)
        if isinstance(value, AttrList) and len(value.items) == 4:
            node.attrs[key] = AttrList(value.kind, tuple(value.items[a] for a in TO_NHWC))
    pads = node.attrs.get("explicit_paddings")
    if isinstance(pads, AttrList) and len(pads.items) == 8:
        pairs = [pads.items[2 * a : 2 * a + 2] for a in TO_NHWC]
        node.attrs["explicit_paddings"] = AttrList(pads.kind, tuple(v for p in pairs for v in p))


def _placeholder(graph: Graph, name: str) -> str:
    attrs = {"dtype": DType("int32"), "shape": ShapeValue((4,))}
    graph.add(Node(name, "Placeholder", attrs=attrs, outputs=[TensorInfo("int32", (4,))]))
    return name


def _transpose(graph: Graph, conv: Node, ref: TensorRef, key: str, perm: str) -> TensorRef:
    info = graph.info(ref)
    node = Node(
        graph.unique_name(f"{conv.name}/{SCOPE}/{key}"),
        "Transpose",
        [ref, TensorRef(perm, 0)],
        {"T": DType(info.dtype), "Tperm": DType("int32")},
        [TensorInfo(info.dtype, _permuted(info.shape, _PERMS[key]))],
        device=conv.device,
    )
    return graph.add(node).output(0)


def _permuted(shape: Any, perm: tuple[int, ...]) -> Any:
    return None if shape is None else tuple(shape[a] for a in perm)
