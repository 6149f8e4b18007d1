"""GraphDef <-> IR: the bad-input contract, defaults, and a lossless round trip."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from graph_helpers import ref, run_graph_def, v1_graph_def
from tensorflow.core.framework import attr_value_pb2, graph_pb2

from tf_stitch.graph.io import (
    attr_from_proto,
    attr_to_proto,
    graph_from_graph_def,
    graph_to_graph_def,
    infer_shapes,
    parse_graph_def,
)
from tf_stitch.graph.ir import (
    AttrList,
    DType,
    FuncRef,
    RawAttr,
    ShapeValue,
    TensorInfo,
    TensorValue,
)


def small() -> graph_pb2.GraphDef:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        tf.identity(x * 2.0, name="y")

    return v1_graph_def(build)


def rich() -> graph_pb2.GraphDef:
    """Control edges, devices, a function library and attributes of every kind."""

    @tf.function
    def triple(t: tf.Tensor) -> tf.Tensor:
        return t * 3.0

    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 2], name="x")
        with tf.device("/device:CPU:0"):
            w = tf.constant(np.random.default_rng(0).standard_normal((2, 2, 2, 3)), tf.float32)
            conv = tf.nn.conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME", name="conv")
        check = tf.debugging.check_numerics(conv, "bad", name="check")
        with tf.control_dependencies([check]):
            leaky = tf.nn.leaky_relu(conv, alpha=0.3, name="leaky")
        mm = tf.matmul(tf.reshape(leaky, [-1, 3]), tf.ones([3, 2]), transpose_b=False, name="mm")
        tf.identity_n([mm, tf.constant([1, 2], tf.int32)], name="idn")
        tf.identity(triple(mm), name="called")
        tf.constant([b"a", b"bc"], name="strings")
        tf.raw_ops.FIFOQueueV2(component_types=[tf.float32, tf.int32], shapes=[[3], []], name="q")

    return v1_graph_def(build)


@pytest.mark.parametrize("data", [b"hello world", b"\xff\xff\xff\xff", bytearray(b"\x0a\x05ab")])
def test_garbage_bytes_are_rejected(data: bytes) -> None:
    with pytest.raises(ValueError, match="not a valid serialized GraphDef"):
        graph_from_graph_def(data)


def test_truncated_bytes_are_rejected() -> None:
    data = small().SerializeToString()
    for cut in (len(data) // 2, len(data) - 3):
        with pytest.raises(ValueError, match=rf"not a valid serialized GraphDef \({cut} bytes\)"):
            parse_graph_def(data[:cut])


@pytest.mark.parametrize("bad", [42, "graph.pb", None, [b"x"], {"node": []}])
def test_non_graph_arguments_are_type_errors(bad: object) -> None:
    with pytest.raises(TypeError, match="expected a GraphDef or its serialized bytes, got"):
        graph_from_graph_def(bad)


def test_parse_accepts_graph_defs_bytes_and_memoryviews() -> None:
    gd = small()
    assert parse_graph_def(gd) is gd
    assert parse_graph_def(memoryview(gd.SerializeToString())) == gd
    assert len(parse_graph_def(b"").node) == 0


def test_missing_input_node_is_named() -> None:
    gd = small()
    gd.node[-1].input[0] = "nope"
    with pytest.raises(ValueError, match=r"cannot import this GraphDef.*'y'.*'nope'"):
        graph_from_graph_def(gd)


def test_unknown_op_is_reported() -> None:
    gd = small()
    gd.node[-1].op = "NoSuchOpAnywhere"
    with pytest.raises(ValueError, match=r"cannot import this GraphDef.*NoSuchOpAnywhere"):
        graph_from_graph_def(gd.SerializeToString())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"outputs": ["nope"]}, "unknown output 'nope': the graph has no node named 'nope'"),
        ({"outputs": ["y:1"]}, r"unknown output 'y:1': node 'y' has 1 output\(s\)"),
        ({"inputs": ["q:0"]}, "unknown input 'q:0'"),
        ({"outputs": ["^y"]}, "not a tensor name"),
    ],
)
def test_unknown_tensor_names_are_value_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        graph_from_graph_def(small(), **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"outputs": "y"}, "outputs must be a list of tensor names, not the string 'y'"),
        ({"inputs": [0]}, "input names must be strings, got int"),
    ],
)
def test_badly_typed_names_are_type_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        graph_from_graph_def(small(), **kwargs)


def test_defaults_feed_placeholders_and_fetch_unconsumed_outputs() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
        tf.compat.v1.placeholder(tf.float32, [2], name="unused")
        tf.unstack(tf.nn.relu(x), num=3, axis=1, name="parts")
        with tf.control_dependencies([x]):
            tf.no_op(name="done")

    g = graph_from_graph_def(v1_graph_def(build))
    assert g.inputs == [ref("x"), ref("unused")]
    assert g.outputs == [ref("parts:0"), ref("parts:1"), ref("parts:2")]
    assert g.targets == ["done"]
    assert g.info(ref("parts:1")) == TensorInfo("float32", (4,))
    assert g.info(ref("x")) == TensorInfo("float32", (4, 3))


def test_explicit_inputs_and_outputs_are_kept_in_order() -> None:
    g = graph_from_graph_def(small(), inputs=["x:0"], outputs=["y", "mul:0"])
    assert g.inputs == [ref("x")] and g.outputs == [ref("y"), ref("mul")]
    assert g.info(ref("y")) == TensorInfo("float32", (None, 3))


def test_round_trip_keeps_every_node_attr_edge_and_device() -> None:
    gd = rich()
    g = graph_from_graph_def(gd)
    assert g.node("check").control_inputs == [] and g.node("leaky").control_inputs == ["check"]
    assert g.node("conv").device == "/device:CPU:0"
    back = graph_to_graph_def(g)
    assert back.library == gd.library and back.versions == gd.versions
    assert [n.name for n in back.node] == [n.name for n in gd.node]
    for new, old in zip(back.node, gd.node, strict=True):
        assert (new.op, list(new.input), new.device) == (old.op, list(old.input), old.device)
        assert set(new.attr) == set(old.attr), old.name
        for key, value in old.attr.items():
            if value.HasField("tensor"):
                want, got = tf.make_ndarray(value.tensor), tf.make_ndarray(new.attr[key].tensor)
                assert got.dtype == want.dtype and np.array_equal(got, want), old.name
            else:
                assert new.attr[key] == value, (old.name, key)


def test_round_trip_computes_the_same_values() -> None:
    gd = rich()
    back = graph_to_graph_def(graph_from_graph_def(gd))
    feeds = {"x:0": np.random.default_rng(1).standard_normal((2, 4, 4, 2)).astype(np.float32)}
    fetches = ["called:0", "idn:0", "idn:1", "strings:0"]
    for want, got in zip(
        run_graph_def(gd, feeds, fetches), run_graph_def(back, feeds, fetches), strict=True
    ):
        np.testing.assert_array_equal(got, want)


def test_attr_kinds_in_the_ir() -> None:
    g = graph_from_graph_def(rich())
    conv = g.node("conv").attrs
    assert conv["strides"] == AttrList("i", (1, 1, 1, 1)) and conv["padding"] == b"SAME"
    assert conv["T"] == DType("float32") and conv["use_cudnn_on_gpu"] is True
    assert conv["explicit_paddings"] == AttrList("", ())
    assert g.node("leaky").attrs["alpha"] == pytest.approx(0.3)
    assert g.node("idn").attrs["T"] == AttrList("type", (DType("float32"), DType("int32")))
    assert g.node("x").attrs["shape"] == ShapeValue((None, 4, 4, 2))
    assert g.node("q").attrs["shapes"] == AttrList("shape", (ShapeValue((3,)), ShapeValue(())))
    assert isinstance(g.node("PartitionedCall").attrs["f"], FuncRef)
    strings = g.node("strings").attrs["value"]
    assert isinstance(strings, TensorValue) and strings.dtype == "string"


def test_stale_output_shapes_attr_is_dropped() -> None:
    with tf.Graph().as_default() as tg:
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        tf.negative(x, name="neg")
    g = graph_from_graph_def(tg.as_graph_def(add_shapes=True))
    assert all("_output_shapes" not in n.attrs for n in g)


@pytest.mark.parametrize(
    "value",
    [
        b"bytes",
        7,
        -1.5,
        True,
        DType("int64"),
        ShapeValue(None),
        ShapeValue((None, 2)),
        FuncRef("f", {"T": DType("float32"), "n": 2}),
        AttrList("s", (b"a", b"b")),
        AttrList("i", (1, 2)),
        AttrList("f", (0.5,)),
        AttrList("b", (True, False)),
        AttrList("type", (DType("bool"),)),
        AttrList("shape", (ShapeValue((1,)), ShapeValue(None))),
        AttrList("func", (FuncRef("g"),)),
        AttrList("", ()),
    ],
)
def test_attr_values_round_trip(value: object) -> None:
    assert attr_from_proto(attr_to_proto(value)) == value


def test_tensor_and_raw_attrs_round_trip() -> None:
    arr = np.arange(6, dtype=np.int64).reshape(2, 3)
    back = attr_from_proto(attr_to_proto(TensorValue(arr, "int64")))
    assert back.dtype == "int64" and np.array_equal(back.array, arr)
    items = attr_from_proto(attr_to_proto(AttrList("tensor", (TensorValue(arr, "int64"),))))
    assert items.kind == "tensor" and np.array_equal(items.items[0].array, arr)
    raw = attr_value_pb2.AttrValue(placeholder="T")
    assert attr_from_proto(raw) == RawAttr(raw.SerializeToString())
    assert attr_to_proto(RawAttr(raw.SerializeToString())) == raw
    assert attr_to_proto("text").s == b"text"


def test_unwritable_attr_value_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="cannot write attribute value of type object"):
        attr_to_proto(object())


def test_infer_shapes_recomputes_stale_infos_without_touching_its_input() -> None:
    def build() -> None:
        x = tf.compat.v1.placeholder(tf.float32, [5, 300], name="x")
        big = tf.constant(np.ones((5, 300), np.float32), name="big")  # >= 1024 elements
        tf.reduce_sum(x + big, axis=1, name="s")

    g = graph_from_graph_def(v1_graph_def(build))
    stale = g.copy()
    stale.node("s").outputs = [TensorInfo("float32", None)]
    fresh = infer_shapes(stale)
    assert fresh.node("s").outputs == [TensorInfo("float32", (5,))]
    assert stale.node("s").outputs == [TensorInfo("float32", None)]
    assert fresh.node("big").op == "Const"
    assert np.array_equal(fresh.node("big").attrs["value"].array, np.ones((5, 300)))
    assert fresh.node("big").outputs == [TensorInfo("float32", (5, 300))]
