"""The C that every emitter writes with: C types by dtype, the table of op -> C expression
(`EXPR`, and `INT_EXPR` for TensorFlow's integer semantics), reductions' starts and steps, the
ops' prelude, literals, size products, the kernel's ABI constants, and which headers a kernel
needs (`cpu_math.h` and the others, read by `header`)."""

from __future__ import annotations

import math
from functools import cache
from importlib import resources

import numpy as np

from tf_stitch.codegen.kernel_ir import (
    Call,
    Expr,
    Kernel,
    Let,
    Lit,
    Load,
    Reduction,
    Size,
)
from tf_stitch.graph.ir import DTYPE_BYTES, INT_DTYPES

LANES = 16
# The parameters of `ts_run` (the op's ABI): inputs, outputs, run-time sizes, a range of rows.
RUN_PARAMETERS = (
    "const void* const* ts_in, void* const* ts_out, const int64_t* ts_sym, int64_t ts_begin, "
    "int64_t ts_end"
)
# Row buffers up to this size are stack arrays; larger ones are allocated once per call.
STACK_BUFFER_BYTES = 64 * 1024
ABI_VERSION = 1
# Matmul tiles narrower than one vector of columns take dot products over k instead.
NARROW_COLUMNS = 16
# A row's broadcast inputs that repeat every this many elements or more are read by an inner
# loop over one period (shorter periods are copied out to the row's length, see _periodic).
MIN_PERIOD = 16
# The C++ type a tensor of each dtype is stored as (cpu_half.h: 16-bit floats), and the type
# its values are computed in.
CTYPE = {
    "float32": "float",
    "float64": "double",
    "bool": "bool",
    **{t: f"{t}_t" for t in sorted(INT_DTYPES)},
    "float16": "ts_f16",
    "bfloat16": "ts_bf16",
}
COMPUTE_CTYPE = {**CTYPE, "float16": "float", "bfloat16": "float"}
# The rounding of a float to each 16-bit format (a Cast to it, computed in float).
ROUND_TO = {"float16": "ts_round_f16", "bfloat16": "ts_round_bf16"}

# Scalar expression of each op; {0}, {1}, {2} are the operands.
EXPR = {
    "Add": "({0} + {1})",
    "AddV2": "({0} + {1})",
    "Sub": "({0} - {1})",
    "Mul": "({0} * {1})",
    "RealDiv": "({0} / {1})",
    "Div": "({0} / {1})",
    "DivNoNan": "ts_div_no_nan({0}, {1})",
    "Maximum": "ts_max({0}, {1})",
    "Minimum": "ts_min({0}, {1})",
    "Pow": "ts_pow({0}, {1})",
    "SquaredDifference": "ts_sqdiff({0}, {1})",
    "Less": "({0} < {1})",
    "LessEqual": "({0} <= {1})",
    "Greater": "({0} > {1})",
    "GreaterEqual": "({0} >= {1})",
    "Equal": "({0} == {1})",
    "NotEqual": "({0} != {1})",
    "LogicalAnd": "({0} && {1})",
    "LogicalOr": "({0} || {1})",
    "LogicalNot": "(!{0})",
    "Select": "({0} ? {1} : {2})",
    "SelectV2": "({0} ? {1} : {2})",
    "Neg": "(-{0})",
    "Abs": "std::fabs({0})",
    "Sign": "ts_sign({0})",
    "Exp": "ts_exp({0})",
    "Expm1": "ts_expm1({0})",
    "Log": "ts_log({0})",
    "Log1p": "ts_log1p({0})",
    "Sqrt": "std::sqrt({0})",
    "Rsqrt": "(1.0f / std::sqrt({0}))",
    "Square": "({0} * {0})",
    "Reciprocal": "(1.0f / {0})",
    "Inv": "(1.0f / {0})",
    "Tanh": "ts_tanh({0})",
    "Sigmoid": "ts_sigmoid({0})",
    "Relu": "ts_relu({0})",
    "Relu6": "ts_min(ts_relu({0}), 6.0f)",
    "Elu": "ts_elu({0})",
    "Selu": "ts_selu({0})",
    "Softplus": "ts_softplus({0})",
    "Softsign": "({0} / (1.0f + std::fabs({0})))",
    "Erf": "ts_erf({0})",
    "Erfc": "ts_erfc({0})",
    "Floor": "std::floor({0})",
    "Ceil": "std::ceil({0})",
    "Round": "std::rint({0})",
    "FloorDiv": "std::floor({0} / {1})",
    "FloorMod": "ts_floor_mod({0}, {1})",
    "TruncateMod": "std::fmod({0}, {1})",
    "Mod": "std::fmod({0}, {1})",
}

# Integer operands' ops (codegen/cpu_int.h; `T` is their type): TensorFlow's wrapping
# arithmetic, its division rounding and its shifts.
INT_EXPR = {
    "Add": "ts_iadd({0}, {1})",
    "AddV2": "ts_iadd({0}, {1})",
    "Sub": "ts_isub({0}, {1})",
    "Mul": "ts_imul({0}, {1})",
    "Neg": "ts_ineg({0})",
    "Abs": "ts_iabs({0})",
    "Sign": "ts_isign({0})",
    "Square": "ts_imul({0}, {0})",
    "SquaredDifference": "ts_isqdiff({0}, {1})",
    "Maximum": "ts_imax({0}, {1})",
    "Minimum": "ts_imin({0}, {1})",
    "Relu": "ts_imax({0}, {T}(0))",
    "Relu6": "ts_imin(ts_imax({0}, {T}(0)), {T}(6))",
    "FloorDiv": "ts_floor_div({0}, {1})",
    "FloorMod": "ts_floor_mod({0}, {1})",
    "Div": "ts_trunc_div({0}, {1})",
    "TruncateDiv": "ts_trunc_div({0}, {1})",
    "TruncateMod": "ts_trunc_mod({0}, {1})",
    "Mod": "ts_trunc_mod({0}, {1})",
    "BitwiseAnd": "{T}({0} & {1})",
    "BitwiseOr": "{T}({0} | {1})",
    "BitwiseXor": "{T}({0} ^ {1})",
    "Invert": "ts_invert({0})",
    "LeftShift": "ts_lshift({0}, {1})",
    "RightShift": "ts_rshift({0}, {1})",
    # the C operators: the same as for floats
    **{op: EXPR[op] for op in ("Less", "LessEqual", "Greater", "GreaterEqual", "Equal")},
    **{op: EXPR[op] for op in ("NotEqual", "Select", "SelectV2")},
}

REDUCE_INIT = {
    "Sum": "0.0f",
    "Mean": "0.0f",
    "Prod": "1.0f",
    "Max": "-INFINITY",
    "Min": "INFINITY",
}
REDUCE_STEP = {
    "Sum": "{a} + {v}",
    "Mean": "{a} + {v}",
    "Prod": "{a} * {v}",
    "Max": "ts_max({a}, {v})",
    "Min": "ts_min({a}, {v})",
}


def reduce_init(r: Reduction) -> str:
    """The value reduction `r`'s accumulator starts from (an integer Max from the values'
    minimum, Min from their maximum: an empty reduction gives them, as TensorFlow's)."""
    if not r.values:
        return REDUCE_INIT[r.kind]
    info = np.iinfo(r.values)
    start = {"Max": int(info.min), "Min": int(info.max), "Prod": 1}.get(r.kind, 0)
    return literal(start, r.dtype)


def reduce_step(r: Reduction, acc: str, value: str) -> str:
    """Reduction `r`'s accumulator `acc` combined with `value` (an integer one wraps)."""
    if not r.values:
        return REDUCE_STEP[r.kind].format(a=acc, v=value)
    fn = {"Prod": "ts_imul", "Max": "ts_imax", "Min": "ts_imin"}.get(r.kind, "ts_iadd")
    return f"{fn}({acc}, static_cast<{CTYPE[r.dtype]}>({value}))"


# Helpers of the op table above (NaN-propagating like TensorFlow's CPU kernels).
OPS_PRELUDE = """
static inline float ts_max(float a, float b) { return a != a ? a : (b != b ? b : (a < b ? b : a)); }
static inline float ts_min(float a, float b) { return a != a ? a : (b != b ? b : (b < a ? b : a)); }
static inline float ts_relu(float a) { return a < 0.0f ? 0.0f : a; }
static inline float ts_sqdiff(float a, float b) { const float d = a - b; return d * d; }
static inline float ts_div_no_nan(float a, float b) { return b == 0.0f ? 0.0f : a / b; }
static inline float ts_floor_mod(float a, float b) {
  const float r = std::fmod(a, b);
  return r != 0.0f && ((b < 0.0f) != (r < 0.0f)) ? r + b : r;
}
static inline float ts_sign(float a) {
  return a > 0.0f ? 1.0f : (a < 0.0f ? -1.0f : (a == 0.0f ? 0.0f : a));
}
static inline float ts_pow(float a, float b) { return std::pow(a, b); }
static inline float ts_elu(float a) { return a > 0.0f ? a : ts_expm1(a); }
static inline float ts_selu(float a) {
  return a > 0.0f ? 1.05070098735548049342f * a : 1.75809934084737685994f * ts_expm1(a);
}
"""


# The op's error cell (runtime/op/common.h): {1, the first out-of-range index, table rows}.
@cache
def header(name: str) -> str:
    return (resources.files("tf_stitch.codegen") / name).read_text()


def call_code(e: Call, args: list[str]) -> str:
    """The C++ (and CUDA) expression of op call `e` on operands already rendered as `args`."""
    if e.op == "Pow" and isinstance(e.args[1], Lit) and e.args[1].value in (2.0, 3.0):
        return "(" + " * ".join([args[0]] * int(e.args[1].value)) + ")"
    if e.op == "LeakyRelu":
        alpha = literal(e.attr("alpha"), "float32")
        return f"({args[0]} > 0.0f ? {args[0]} : {args[0]} * {alpha})"
    if e.op in ("OnesLike", "ZerosLike"):
        return literal(e.op == "OnesLike", str(e.attr("dtype")))
    if e.op == "Cast":
        return _cast(args[0], str(e.attr("src")), str(e.attr("dst")))
    operands = str(dict(e.attrs).get("T", ""))
    if operands in INT_DTYPES:
        return INT_EXPR[e.op].format(*args, T=CTYPE[operands])
    return EXPR[e.op].format(*args)


def _cast(x: str, src: str, dst: str) -> str:
    """A Cast of `x` (computed in COMPUTE_CTYPE[src]) to `dst`, computed in COMPUTE_CTYPE[dst]."""
    if src == dst:
        return x
    if dst in INT_DTYPES:
        if src == "bool" or src in INT_DTYPES:  # an integer wraps (a bool is 0 or 1)
            return f"static_cast<{CTYPE[dst]}>({x})"
        if src in ROUND_TO:  # the 16-bit value TensorFlow's op before the Cast rounded to
            x = f"{ROUND_TO[src]}({x})"
        return f"ts_f2i<{CTYPE[dst]}>({x})"
    if dst == "float64":
        return f"({x} ? 1.0 : 0.0)" if src == "bool" else f"static_cast<double>({x})"
    if src == "float64" and dst != "bool":  # to float first (Eigen's double -> half is too)
        x = f"static_cast<float>({x})"
        return f"{ROUND_TO[dst]}({x})" if dst in ROUND_TO else x
    if dst == "bool":
        return f"({x} != 0)" if src in INT_DTYPES else f"({x} != 0.0f)"
    if src in INT_DTYPES:  # round to nearest, as TensorFlow's Cast
        x = f"static_cast<float>({x})"
    elif src == "bool":
        x = f"({x} ? 1.0f : 0.0f)"
    # a float, a float16 or a bfloat16 (computed in float): rounded to a 16-bit format (a
    # float16 rounded to bfloat16 rounds once: its value is exact in float)
    return f"{ROUND_TO[dst]}({x})" if dst in ROUND_TO else x


def itemsize(dtype: str) -> int:
    """Bytes of one element of a tensor of `dtype` as a kernel stores it."""
    return DTYPE_BYTES[dtype]


def has_int(kernel: Kernel) -> bool:
    """Whether the kernel computes with integers (it then needs cpu_int.h)."""
    typed = (dict(call.attrs) for call in kernel_calls(kernel))
    integers = any(a.get("T") in INT_DTYPES or a.get("dst") in INT_DTYPES for a in typed)
    return integers or any(r.values for r in kernel.reductions)


def kernel_calls(kernel: Kernel) -> list[Call]:
    """Every op call of the kernel's statements (and its attention's expressions)."""
    stmts = [s for block in kernel.row_stmts + kernel.loops for s in block]
    a = kernel.attention
    exprs = [s.expr for s in stmts if isinstance(s, Let)]
    exprs += [a.q, a.k, a.v, a.score, *([a.post] if a.post else [])] if a else []
    calls: list[Call] = []
    while exprs:
        e = exprs.pop()
        if isinstance(e, Call):
            calls.append(e)
            exprs.extend(e.args)
    return calls


def has_double(kernel: Kernel) -> bool:
    """Whether the kernel computes in double (it then needs cpu_double.h)."""
    stmts = [s for block in kernel.row_stmts + kernel.loops for s in block]
    return (
        any(p.dtype == "float64" for p in kernel.inputs + kernel.outputs)
        or any(isinstance(s, Let) and s.dtype == "float64" for s in stmts)
        or any(r.dtype == "float64" for r in kernel.reductions)
    )


def has_half(kernel: Kernel) -> bool:
    """Whether the kernel stores a tensor as a 16-bit float, or rounds to one (it then needs
    cpu_half.h)."""
    stmts = [s for block in kernel.row_stmts + kernel.loops for s in block]
    return (
        any(p.dtype in ROUND_TO for p in kernel.inputs + kernel.outputs)
        or any(isinstance(s, Let) and s.dtype in ROUND_TO for s in stmts)
        or any(c.op == "Cast" and c.attr("dst") in ROUND_TO for c in kernel_calls(kernel))
    )


def value_loads(e: Expr) -> list[Load]:
    if isinstance(e, Load):
        return [e]
    if isinstance(e, Call):
        return [x for a in e.args for x in value_loads(a)]
    return []


def source_header(kernel: Kernel, language: str = "") -> list[str]:
    """The comment a kernel's source opens with: its schedule. The group's nodes are left out
    (explain() lists them), so that groups of the same structure (the layers of a BERT, the
    last one with an Identity more) have the same source, one cache key and one compile."""
    kind = f" ({language})" if language else ""
    return [f"// tf_stitch kernel{kind}: {kernel.schedule}"]


def product(sizes: tuple[Size, ...]) -> str:
    return " * ".join(f"({s})" for s in sizes) or "1"


def literal(value: float | bool | str, dtype: str) -> str:
    """An exact C++ literal (hex floats keep every bit)."""
    if dtype == "bool":
        return "true" if value else "false"
    if dtype in INT_DTYPES:
        return _int_literal(int(value), dtype)
    v = float(value)
    suffix = "" if dtype == "float64" else "f"
    if v != v:
        return "NAN"
    if v in (float("inf"), float("-inf")):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    # copysign, not `v >= 0`: -0.0 must be parenthesized too, or Neg spells it `(--0x0p+0f)`
    return f"{v.hex()}{suffix}" if math.copysign(1.0, v) > 0 else f"(-{(-v).hex()}{suffix})"


def _int_literal(v: int, dtype: str) -> str:
    """An integer of `dtype` (typed, so that it deduces the same template as its operands)."""
    if v == -(2**63):
        return "INT64_MIN"
    suffix = "ULL" if dtype.startswith("u") else "LL"
    return f"{CTYPE[dtype]}({v}{suffix})" if v >= 0 else f"{CTYPE[dtype]}(-{-v}{suffix})"
