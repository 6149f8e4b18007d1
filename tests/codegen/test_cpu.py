"""cpu: exact literals, C++ that compiles for every op and several groups, kernels that run."""

from __future__ import annotations

import ctypes
import math
import shutil
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from tf_stitch.codegen import cpu
from tf_stitch.codegen.cpu import emit_cpu, literal
from tf_stitch.codegen.kernel_ir import Access, Call, Kernel, Let, Lit, Load, Param, Store, Var
from tf_stitch.codegen.lower import lower
from tf_stitch.fusion.op_kinds import OP_TABLE, OpKind
from tf_stitch.fusion.planner import PlannerOptions, plan_groups
from tf_stitch.graph import frontends
from tf_stitch.graph.ir import INT_DTYPES, TensorRef

S = tf.TensorSpec
CXX = shutil.which("c++")
needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler")


def compile_cxx(source: str, tmp_path: Path, *flags: str, name: str = "k.cc") -> Path:
    path = tmp_path / name
    path.write_text(source)
    out = tmp_path / (name + ".out")
    cmd = [str(CXX), "-std=c++17", "-O1", *flags, str(path)]
    if "-fsyntax-only" not in flags:
        cmd += ["-o", str(out)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{name} does not compile:\n{result.stderr[-3000:]}"
    return out


def kernel_source(fn: Callable[..., Any], *specs: tf.TensorSpec, budget: int = 20480) -> str:
    graph = frontends.load(tf.function(fn).get_concrete_function(*specs)).graph
    (group,) = plan_groups(graph, PlannerOptions(on_chip_budget=budget)).groups
    return emit_cpu(lower(graph, group, "k"))


def f32_bits(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", v))[0]


# -- literals -------------------------------------------------------------------------------------
def test_special_literals() -> None:
    assert literal(True, "bool") == "true" and literal(False, "bool") == "false"
    assert literal(float("nan"), "float32") == "NAN"
    assert literal(float("inf"), "float32") == "INFINITY"
    assert literal(float("-inf"), "float32") == "(-INFINITY)"
    assert literal(1.5, "float32") == "0x1.8000000000000p+0f"
    assert literal(-1.5, "float32") == "(-0x1.8000000000000p+0f)"


def test_negative_zero_keeps_its_sign_and_its_parentheses() -> None:
    text = literal(-0.0, "float32")
    assert text.startswith("(-") and text.endswith(")")
    assert literal(0.0, "float32") == "0x0.0p+0f"


@settings(max_examples=300, database=None)
@given(st.integers(0, 2**32 - 1))
def test_finite_literals_round_trip_every_float32_bit(bits: int) -> None:
    v = float(np.uint32(bits).view(np.float32))
    if not math.isfinite(v):
        return
    text = literal(v, "float32")
    body = text[1:-1] if text.startswith("(") else text
    assert body.endswith("f")
    back = float.fromhex(body[:-1])
    assert back == v and math.copysign(1.0, back) == math.copysign(1.0, v)


LITERAL_VALUES = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.1,
    -2.5,
    1 / 3,
    1e-45,
    -1e-45,
    1.17549435e-38,
    3.4028235e38,
    -3.4028235e38,
    1e-5,
    float("inf"),
    float("-inf"),
    float("nan"),
]


@needs_cxx
def test_literals_compile_to_the_exact_float32_bits(tmp_path: Path) -> None:
    values = [float(np.float32(v)) for v in LITERAL_VALUES]
    lines = []
    for v in values:
        lit = literal(v, "float32")
        lines.append(f"  show({lit}, {cpu.EXPR['Neg'].format(lit)});")
    source = "\n".join(
        [
            "#include <cmath>",
            "#include <cstdint>",
            "#include <cstdio>",
            "#include <cstring>",
            "static void show(float a, float b) {",
            "  uint32_t x, y; std::memcpy(&x, &a, 4); std::memcpy(&y, &b, 4);",
            '  std::printf("%08x %08x\\n", (unsigned)x, (unsigned)y);',
            "}",
            "int main() {",
            *lines,
            "  return 0;",
            "}",
        ]
    )
    exe = compile_cxx(source, tmp_path, name="literals.cc")
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    for i, v in enumerate(values):
        got, negated = int(out[2 * i], 16), int(out[2 * i + 1], 16)
        if math.isnan(v):
            assert got & 0x7F800000 == 0x7F800000 and got & 0x007FFFFF, hex(got)
            continue
        assert got == f32_bits(v), (v, hex(got))
        assert negated == f32_bits(v) ^ 0x80000000, (v, hex(negated))


# -- generated source compiles --------------------------------------------------------------------
def layer_norm(x: tf.Tensor) -> tf.Tensor:
    m = tf.reduce_mean(x, -1, keepdims=True)
    v = tf.reduce_mean(tf.square(x - m), -1, keepdims=True)
    return (x - m) * tf.math.rsqrt(v + 1e-5)


def softmax(x: tf.Tensor) -> tf.Tensor:
    e = tf.exp(x - tf.reduce_max(x, -1, keepdims=True))
    return e / tf.reduce_sum(e, -1, keepdims=True)


def general_access(x: tf.Tensor, b: tf.Tensor) -> Any:
    y = x * b
    s = tf.reduce_min(y, [1, 2])
    return s, tf.maximum(y - tf.reshape(s, [-1, 1, 1]), 0.0)


def masks(x: tf.Tensor, c: tf.Tensor) -> tf.Tensor:
    m = tf.logical_and(x > 0.0, tf.logical_not(c))
    y = tf.where(m, tf.nn.leaky_relu(x, 0.3), tf.pow(x, 3.0))
    return tf.cast(m, tf.float32) + y + tf.pow(x, 2.0) + tf.pow(x, -0.0)


GROUPS = {
    "layer_norm": (layer_norm, [S([None, 64])]),
    "softmax": (softmax, [S([8, 128])]),
    "softmax_dynamic_row": (softmax, [S([None, None])]),
    "bias_gelu": (lambda x, b: tf.nn.gelu(x + b), [S([None, 32]), S([32])]),
    "general_access": (general_access, [S([2, 3, 4]), S([3, 1])]),
    "masks": (masks, [S([4, 16]), S([4, 16], tf.bool)]),
    "row_max_prod": (lambda x: tf.reduce_prod(tf.exp(x), -1) - tf.reduce_max(x, -1), [S([3, 5])]),
}


@needs_cxx
@pytest.mark.parametrize("name", sorted(GROUPS))
def test_generated_source_compiles(name: str, tmp_path: Path) -> None:
    fn, specs = GROUPS[name]
    source = kernel_source(fn, *specs)
    assert source.count('extern "C"') == 2
    compile_cxx(source, tmp_path, "-fsyntax-only", "-Wall", name=f"{name}.cc")


def every_op_kernel() -> Kernel:
    """One loop applying every elementwise op of the table to loaded values."""

    def param(index: int, name: str, dtype: str) -> Param:
        return Param(
            index,
            name,
            TensorRef(f"t{name}"),
            dtype,
            (4, 8),
            (0, 1),
            Access((8, 1), "contiguous", "contiguous", 8),
            False,
        )

    f, b = Var("f"), Var("b")
    stmts: list[Any] = [Let("f", "float32", Load("in0")), Let("b", "bool", Load("in1"))]
    for op, spec in sorted(OP_TABLE.items()):
        if spec.kind is not OpKind.ELEMENTWISE or (op not in cpu.EXPR and op in cpu.INT_EXPR):
            continue  # of integers only (below)
        args: tuple[Any, ...] = (f,) * spec.data_inputs
        attrs: tuple[tuple[str, Any], ...] = ()
        if op in ("LogicalAnd", "LogicalOr", "LogicalNot"):
            args = (b,) * spec.data_inputs
        elif op in ("Select", "SelectV2"):
            args = (b, f, Lit(-0.0, "float32"))
        elif op == "LeakyRelu":
            attrs = (("alpha", 0.2),)
        elif op == "Cast":
            attrs = (("src", "float32"), ("dst", "bool"))
        elif op in ("OnesLike", "ZerosLike"):
            attrs = (("dtype", "float32"),)
        out = (
            "bool"
            if op
            in (
                "Less",
                "LessEqual",
                "Greater",
                "GreaterEqual",
                "Equal",
                "NotEqual",
                "LogicalAnd",
                "LogicalOr",
                "LogicalNot",
                "Cast",
            )
            else "float32"
        )
        stmts.append(Let(f"v_{op}", out, Call(op, args, attrs)))
    for t in sorted(INT_DTYPES):  # every integer op of every integer dtype
        i = Var(f"i_{t}")
        stmts.append(Let(i.name, t, Call("Cast", (f,), (("src", "float32"), ("dst", t)))))
        for op in sorted(cpu.INT_EXPR):
            operands = (b, i, Lit(3, t)) if op in ("Select", "SelectV2") else (i, Lit(-3, t))
            out = "bool" if op.startswith(("Less", "Greater", "Equal", "NotEqual")) else t
            call = Call(op, operands[: OP_TABLE[op].data_inputs], (("T", t),))
            stmts.append(Let(f"v_{op}_{t}", out, call))
    stmts.append(Let("p2", "float32", Call("Pow", (f, Lit(2.0, "float32")))))
    stmts.append(Let("neg0", "float32", Call("Neg", (Lit(-0.0, "float32"),))))
    stmts.append(Store("out0", "v_Tanh"))
    return Kernel(
        "every_op",
        (4, 8),
        1,
        [param(0, "in0", "float32"), param(1, "in1", "bool")],
        [param(0, "out0", "float32")],
        row_stmts=[[], []],
        loops=[stmts],
    )


@needs_cxx
def test_every_elementwise_op_compiles(tmp_path: Path) -> None:
    compile_cxx(emit_cpu(every_op_kernel()), tmp_path, "-fsyntax-only", name="every_op.cc")


# -- kernels that run -----------------------------------------------------------------------------
def run_kernel(
    source: str,
    tmp_path: Path,
    inputs: list[np.ndarray],
    outputs: list[np.ndarray],
    sym: list[int],
    rows: int,
) -> None:
    lib = ctypes.CDLL(str(compile_cxx(source, tmp_path, "-shared", "-fPIC", name="run.cc")))
    assert lib.ts_abi_version() == cpu.ABI_VERSION
    ins = (ctypes.c_void_p * len(inputs))(*[a.ctypes.data for a in inputs])
    outs = (ctypes.c_void_p * len(outputs))(*[a.ctypes.data for a in outputs])
    syms = (ctypes.c_int64 * max(1, len(sym)))(*sym)
    lib.ts_run(ins, outs, syms, ctypes.c_int64(0), ctypes.c_int64(rows))


@needs_cxx
@pytest.mark.parametrize("budget", [20480, 64])  # buffered exp, recomputed exp
def test_softmax_kernel_matches_numpy(tmp_path: Path, budget: int) -> None:
    x = np.random.default_rng(0).standard_normal((5, 37)).astype(np.float32) * 4
    source = kernel_source(softmax, S([None, 37]), budget=budget)
    assert ("buf0" in source) == (budget > 64)
    y = np.zeros_like(x)
    run_kernel(source, tmp_path, [x], [y], sym=[5], rows=5)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(-1, keepdims=True), rtol=2e-6, atol=1e-7)


@needs_cxx
def test_layer_norm_kernel_matches_numpy(tmp_path: Path) -> None:
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32) + 2
    y = np.zeros_like(x)
    run_kernel(kernel_source(layer_norm, S([None, 64])), tmp_path, [x], [y], sym=[3], rows=3)
    m = x.mean(-1, keepdims=True)
    ref = (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


@needs_cxx
def test_a_bias_of_few_channels_is_read_from_its_repeated_row(tmp_path: Path) -> None:
    """Rows of several pixels of 6 channels each: the bias is repeated once into a row-long
    buffer that the row's loop reads contiguously, and the values are the broadcast's."""
    source = kernel_source(lambda x, b: tf.tanh(x + b), S([2, 4, 5, 6]), S([6]))
    assert "in1_rep[" in source and "in1_i" not in source
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 5, 6)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    y = np.zeros_like(x)
    run_kernel(source, tmp_path, [x, b], [y], sym=[], rows=1)
    np.testing.assert_allclose(y, np.tanh(x + b), rtol=1e-6, atol=1e-6)


def _batch_norm_relu6(
    x: tf.Tensor, mean: tf.Tensor, var: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor
) -> tf.Tensor:
    scale = tf.math.rsqrt(var + 1e-3) * gamma
    return tf.nn.relu6(x * scale + (beta - mean * scale))


@needs_cxx
def test_per_channel_inputs_over_rows_of_pixels_are_read_by_a_loop_over_one_period(
    tmp_path: Path,
) -> None:
    """A live batch norm's four per-channel inputs over rows of whole image lines (MobileNetV2's
    first depthwise epilogue: 112 pixels of 32 channels, 57 KB of repeated rows, more than the
    stack buffer holds) are read by an inner loop over one pixel's channels: contiguously,
    without a division per element. Their first version computed `(i / 1) % 32` for two of
    them and ran 20x slower than TensorFlow's ops."""
    c = 32
    specs = [S([1, 112, 112, c]), *[S([c])] * 4]
    graph = frontends.load(tf.function(_batch_norm_relu6).get_concrete_function(*specs)).graph
    (group,) = plan_groups(graph, PlannerOptions(on_chip_budget=20480)).groups
    kernel = lower(graph, group, "k")
    source = emit_cpu(kernel)
    assert "split_dim=2" in source and f"ts_p < {c}" in source
    assert "_rep[" not in source and "_i = " not in source and "%" not in source
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 112, 112, c)).astype(np.float32) * 4
    mean, gamma, beta = (rng.standard_normal(c).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.1, 2.0, c).astype(np.float32)
    y = np.zeros_like(x)
    values = {"x": x, "mean": mean, "var": var, "gamma": gamma, "beta": beta}
    inputs = [values[p.tensor.node] for p in kernel.inputs]
    run_kernel(source, tmp_path, inputs, [y], sym=[], rows=112)
    want = _batch_norm_relu6(x, mean, var, gamma, beta).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


@needs_cxx
def test_a_period_too_short_for_a_loop_of_its_own_is_still_repeated_along_the_row() -> None:
    """Channels fewer than cpu.MIN_PERIOD keep the row-long copy: an inner loop of 6 would not
    vectorize."""
    source = kernel_source(_batch_norm_relu6, S([1, 6, 40, 6]), *[S([6])] * 4)
    assert "ts_p <" not in source and "_rep[" in source
