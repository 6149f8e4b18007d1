"""Tests for counting kernels in optimized HLO text.

The `xla_cpu_*.hlo` fixtures are XLA:CPU's optimized HLO, as printed by TensorFlow 2.21's
`tf.function(f, jit_compile=True).experimental_get_compiler_ir(*args)(stage="optimized_hlo")`
for `ln_gelu`, `matmul_bias_relu` and `matmul_tanh_loop(5)` below (inputs [64,768]/[768]/[768],
[64,128]/[128,256]/[256] and [32,32]). The `xla_gpu_*.hlo` fixture is hand-written in XLA:GPU's
style (operand shapes printed inline, cuBLAS custom-call, JSON backend configs).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf

from tf_stitch.launches.hlo_kernels import (
    HloKernels,
    count_hlo_kernels,
    count_xla_cpu_launches,
    parse_instruction,
)

FIXTURES = Path(__file__).parent / "fixtures"


def ln_gelu(x, gamma, beta):
    mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
    y = (x - mean) * tf.math.rsqrt(var + 1e-5) * gamma + beta
    return tf.nn.gelu(y, approximate=False)


def matmul_bias_relu(x, w, b):
    return tf.nn.relu(tf.matmul(x, w) + b)


def matmul_tanh_loop(trips: int):
    def f(x):
        def body(i, y):
            return i + 1, tf.tanh(tf.matmul(y, y)) * 2.0

        return tf.while_loop(lambda i, y: i < trips, body, [tf.constant(0), x])[1]

    return f


def _fixture(name: str) -> HloKernels:
    return count_hlo_kernels((FIXTURES / name).read_text())


def test_cpu_layer_norm_gelu_fixture() -> None:
    k = _fixture("xla_cpu_layer_norm_gelu.hlo")
    assert k.total == 5
    assert k.by_opcode == {"fusion": 5}
    assert [n for n, _ in k.by_name] == [
        "ynn_fusion",
        "subtract_multiply_fusion",
        "wrapped_reduce-window",
        "add_rsqrt_fusion",
        "select_multiply_fusion",
    ]
    assert k.notes == []


def test_cpu_matmul_bias_relu_fixture() -> None:
    k = _fixture("xla_cpu_matmul_bias_relu.hlo")
    assert k == HloKernels(
        total=2,
        by_opcode={"dot": 1, "fusion": 1},
        by_name=[("MatMul.2", "dot"), ("broadcast_maximum_fusion", "fusion")],
        notes=[],
    )


def test_cpu_while_fixture_multiplies_by_trip_count() -> None:
    k = _fixture("xla_cpu_while_matmul_tanh_5.hlo")
    # 2 copies into the loop state; body (dot + 2 fusions) x 5; condition (1 fusion) x 6
    assert k.total == 2 + 3 * 5 + 1 * 6
    assert k.by_opcode == {"copy": 2, "dot": 5, "fusion": 16}


def test_gpu_style_fixture() -> None:
    k = _fixture("xla_gpu_handmade_gemm_while_4.hlo")
    # gemm + bias/relu fusion + copy; body (2 fusions) x 4; condition (1 fusion) x 5
    assert k.total == 3 + 2 * 4 + 1 * 5
    assert k.by_opcode == {"copy": 1, "custom-call": 1, "fusion": 14}
    assert k.by_name == [
        ("custom-call.1", "custom-call"),
        ("loop_bias_relu_fusion", "fusion"),
        ("copy.1", "copy"),
        ("loop_compare_fusion", "fusion"),
        ("loop_tanh_fusion", "fusion"),
        ("loop_add_fusion", "fusion"),
    ]
    assert k.notes == []


CONTROL_FLOW = """\
HloModule control_flow

%fused (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  ROOT %e = f32[8]{0} exponential(%p)
}

%small (a: f32[8]) -> f32[8] {
  %a = f32[8]{0} parameter(0)
  ROOT %n = f32[8]{0} negate(%a)
}

%big (b: f32[8]) -> f32[8] {
  %b = f32[8]{0} parameter(0)
  %f1 = f32[8]{0} fusion(%b), kind=kLoop, calls=%fused
  ROOT %s = f32[8]{0} sort(%f1), dimensions={0}, to_apply=%cmp
}

%cmp (x: f32[], y: f32[]) -> pred[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %lt = pred[] compare(%x, %y), direction=LT
}

%cond (t: (s32[], f32[8])) -> pred[] {
  %t = (s32[], f32[8]{0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %c = s32[] constant(3)
  ROOT %lt.1 = pred[] compare(%i, %c), direction=LT
}

%body (t.1: (s32[], f32[8])) -> (s32[], f32[8]) {
  %t.1 = (s32[], f32[8]{0}) parameter(0)
  %i.1 = s32[] get-tuple-element(%t.1), index=0
  %v = f32[8]{0} get-tuple-element(%t.1), index=1
  %cl = f32[8]{0} call(%v), to_apply=%small
  ROOT %r = (s32[], f32[8]{0}) tuple(%i.1, %cl)
}

ENTRY %main (arg: f32[8], k: s32[]) -> f32[8] {
  %arg = f32[8]{0} parameter(0)
  %k = s32[] parameter(1)
  %cnd = f32[8]{0} conditional(%k, %arg, %arg), branch_computations={%small, %big}
  %zero = s32[] constant(0)
  %tup = (s32[], f32[8]{0}) tuple(%zero, %cnd)
  %w = (s32[], f32[8]{0}) while(%tup), condition=%cond, body=%body
  %out = f32[8]{0} get-tuple-element(%w), index=1
  %start = ((f32[8]{0}), f32[8]{0}, u32[]) all-reduce-start(%out), to_apply=%add
  %done = f32[8]{0} all-reduce-done(%start)
  %as = ((f32[8]{0}), f32[8]{0}, s32[]) async-start(%done), calls=%small
  %au = ((f32[8]{0}), f32[8]{0}, s32[]) async-update(%as)
  ROOT %ad = f32[8]{0} async-done(%au)
}

%add (x.2: f32[], y.2: f32[]) -> f32[] {
  %x.2 = f32[] parameter(0)
  %y.2 = f32[] parameter(1)
  ROOT %sum = f32[] add(%x.2, %y.2)
}
"""


def test_control_flow_async_and_notes() -> None:
    k = count_hlo_kernels(CONTROL_FLOW)
    # conditional: max(small=1, big=2) -> 2; while (unknown trips -> 1): cond (1) x 2 and
    # body (call -> 1) x 1; all-reduce pair -> 1; async-start wrapping %small -> 1
    assert k.by_opcode == {"all-reduce-start": 1, "compare": 2, "fusion": 1, "negate": 2, "sort": 1}
    assert k.total == 7
    assert ("n", "negate") in k.by_name and ("done", "all-reduce-done") not in k.by_name
    assert len(k.notes) == 2
    assert "conditional cnd" in k.notes[0] and "big" in k.notes[0]
    assert "while w" in k.notes[1] and "unknown" in k.notes[1]
    assert "(2 a trip)" in k.notes[1]  # its body and condition: what each further trip adds


def test_string_backend_config_and_unprefixed_names() -> None:
    text = """\
HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

body {
  p = (s32[], f32[4]{0}) parameter(0)
  v = f32[4]{0} get-tuple-element(p), index=1
  e = f32[4]{0} exponential(v)
  i = s32[] get-tuple-element(p), index=0
  ROOT t = (s32[], f32[4]{0}) tuple(i, e)
}

cond {
  p.1 = (s32[], f32[4]{0}) parameter(0)
  ROOT c = pred[] constant(true)
}

ENTRY main {
  a = f32[4]{0} parameter(0)
  z = s32[] constant(0)
  t.1 = (s32[], f32[4]{0}) tuple(z, a)
  w = (s32[], f32[4]{0}) while(t.1), condition=cond, body=body, \
backend_config="{\\"known_trip_count\\":{\\"n\\":\\"7\\"}}"
  ROOT o = f32[4]{0} get-tuple-element(w), index=1
}
"""
    k = count_hlo_kernels(text)
    assert k.total == 7
    assert k.by_opcode == {"exponential": 7}
    assert k.notes == []


def test_parse_instruction_with_tuple_shape() -> None:
    inst = parse_instruction(
        "  %w = (s32[], f32[2,2]{1,0}, /*index=2*/f32[]) while(%t), condition=%c, body=%b, "
        'metadata={op_name="x/body=y"}, backend_config={"known_trip_count":{"n":"2"}}'
    )
    assert inst is not None
    assert (inst.name, inst.opcode) == ("w", "while")
    assert inst.called == {"condition": ["c"], "body": ["b"]}
    assert '"n":"2"' in inst.backend_config
    assert parse_instruction("HloModule m") is None


def test_live_xla_cpu_counts() -> None:
    x, g, b = tf.ones([64, 768]), tf.ones([768]), tf.zeros([768])
    assert count_xla_cpu_launches(ln_gelu, (x, g, b)).total == 5
    mbr = count_xla_cpu_launches(
        tf.function(matmul_bias_relu), [tf.ones([64, 128]), tf.ones([128, 256]), tf.ones([256])]
    )
    assert mbr.by_opcode == {"dot": 1, "fusion": 1}


def test_live_xla_cpu_while_multiplies() -> None:
    x = tf.ones([32, 32])
    five = count_xla_cpu_launches(matmul_tanh_loop(5), (x,))
    ten = count_xla_cpu_launches(matmul_tanh_loop(10), (x,))
    assert five.total == 23
    assert ten.total - five.total == 5 * (3 + 1)


def test_uncompilable_function_raises() -> None:
    with pytest.raises(RuntimeError, match="AsString"):
        count_xla_cpu_launches(lambda x: tf.strings.as_string(x), (tf.ones([3]),))
