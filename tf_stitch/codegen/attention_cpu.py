"""An attention kernel (kernel_ir.Attention) -> C++ for the CPU.

A unit of work is a block of query rows of one batch point (a block that crosses into the next
batch point is cut there). For each batch point the kernel computes K transposed and V once
(their expressions evaluated: a bias add or a scale costs nothing more), then for each block:
its rows of Q, the scores as one matmul tile (`cpu_matmul.h`), the epilogue and the softmax
along each row in place (max, exp of the difference, sum, divide: the ops decompose-softmax
writes, in their order) and what the probabilities go through, and the context as a second tile,
written through the output's strides (a transposed output costs nothing more).

`AttentionRenderer` is shared with the CUDA emitter: the domain's coordinates and the scalar
expressions of Q, K, V and the epilogue at them.
"""

from __future__ import annotations

from tf_stitch.codegen.c_tables import (
    ABI_VERSION,
    CTYPE,
    OPS_PRELUDE,
    call_code,
    has_half,
    header,
    literal,
    product,
    source_header,
)
from tf_stitch.codegen.kernel_ir import Attention, Call, Expr, Kernel, Lit, Load, Param, Var


class AttentionRenderer:
    """Names of the domain's coordinates and the C expressions of the kernel's values."""

    def __init__(self, kernel: Kernel) -> None:
        assert kernel.attention is not None
        self.k = kernel
        self.a: Attention = kernel.attention
        self.params = {p.name: p for p in kernel.inputs + kernel.outputs}
        nb = self.a.batch
        self.coords = [f"ts_c{i}" for i in range(nb)] + ["ts_i", "ts_j", "ts_d", "ts_e"]
        self.queries, self.keys, self.head, self.value = kernel.domain[nb : nb + 4]

    def expr(self, e: Expr) -> str:
        if isinstance(e, Var):
            return e.name
        if isinstance(e, Lit):
            return literal(e.value, e.dtype)
        if isinstance(e, Load):
            return f"{e.param}[{self.offset(self.params[e.param])}]"
        if isinstance(e, Call):
            return call_code(e, [self.expr(x) for x in e.args])
        raise TypeError(f"an attention kernel has no expression {e!r}")

    def offset(self, p: Param) -> str:
        """The element offset of `p` at the current coordinates."""
        terms = [
            f"{self.coords[a]} * ({stride})" if stride != 1 else self.coords[a]
            for a, stride in enumerate(p.access.strides)
            if stride != 0 and self.k.domain[a] != 1
        ]
        return " + ".join(terms) or "0"

    def batch_coords(self, flat: str) -> list[str]:
        """Statements binding the batch coordinates of the flat batch index `flat`."""
        sizes = self.k.domain[: self.a.batch]
        lines = []
        for i, size in enumerate(sizes):
            inner = product(tuple(sizes[i + 1 :]))
            lines.append(f"const int64_t ts_c{i} = ({flat} / ({inner})) % ({size});")
            lines.append(f"(void)ts_c{i};")
        return lines

    def sizes(self) -> list[str]:
        return [
            f"const int64_t ts_Q = {self.queries};",
            f"const int64_t ts_K = {self.keys};",
            f"constexpr int64_t ts_D = {self.head};",
            f"constexpr int64_t ts_E = {self.value};",
        ]

    def pointers(self, qualifier: str = "__restrict") -> list[str]:
        """The kernel's params as typed pointers into `ts_in` / `ts_out` (the CPU ABI)."""
        lines = []
        for p in self.k.inputs:
            ct = CTYPE[p.dtype]
            lines.append(
                f"const {ct}* {qualifier} {p.name} = static_cast<const {ct}*>(ts_in[{p.index}]);"
            )
        for p in self.k.outputs:
            ct = CTYPE[p.dtype]
            lines.append(f"{ct}* {qualifier} {p.name} = static_cast<{ct}*>(ts_out[{p.index}]);")
        return lines

    def members(self, language: str) -> list[str]:
        return source_header(self.k, language)


def emit_attention_cpu(kernel: Kernel) -> str:
    r = AttentionRenderer(kernel)
    a, rows = r.a, kernel.block_rows
    symbols = [f"const int64_t {n} = ts_sym[{s}];" for s, (n, _, _) in enumerate(kernel.symbols)]
    body = [
        *symbols,
        "(void)ts_sym;",
        *r.sizes(),
        *r.pointers(),
        f"const int64_t ts_rows = {product(kernel.outer)};",
        f"const int64_t ts_last = ts_end * {rows} < ts_rows ? ts_end * {rows} : ts_rows;",
        f"std::unique_ptr<float[]> ts_qb(new float[{rows} * ts_D]);",
        "std::unique_ptr<float[]> ts_kt(new float[ts_D * ts_K + 1]);",
        "std::unique_ptr<float[]> ts_vb(new float[ts_K * ts_E + 1]);",
        f"std::unique_ptr<float[]> ts_sc(new float[{rows} * ts_K + 1]);",
        f"std::unique_ptr<float[]> ts_ob(new float[{rows} * ts_E]);",
        "int64_t ts_kv = -1;  // the batch point whose K and V are in ts_kt, ts_vb",
        f"for (int64_t ts_r0 = ts_begin * {rows}; ts_r0 < ts_last;) {{",
        "  const int64_t ts_bq = ts_r0 / ts_Q;",
        "  const int64_t ts_i0 = ts_r0 - ts_bq * ts_Q;",
        "  int64_t ts_n = ts_Q - ts_i0 < ts_last - ts_r0 ? ts_Q - ts_i0 : ts_last - ts_r0;",
        f"  if (ts_n > {rows}) ts_n = {rows};",
        *(f"  {line}" for line in r.batch_coords("ts_bq")),
        "  if (ts_bq != ts_kv) {",
        "    for (int64_t ts_j = 0; ts_j < ts_K; ++ts_j) {",
        "      for (int64_t ts_d = 0; ts_d < ts_D; ++ts_d) {",
        f"        ts_kt[ts_d * ts_K + ts_j] = {r.expr(a.k)};",
        "      }",
        "      for (int64_t ts_e = 0; ts_e < ts_E; ++ts_e) {",
        f"        ts_vb[ts_j * ts_E + ts_e] = {r.expr(a.v)};",
        "      }",
        "    }",
        "    ts_kv = ts_bq;",
        "  }",
        "  for (int64_t ts_r = 0; ts_r < ts_n; ++ts_r) {",
        "    const int64_t ts_i = ts_i0 + ts_r;",
        "    (void)ts_i;",
        "    for (int64_t ts_d = 0; ts_d < ts_D; ++ts_d) {",
        f"      ts_qb[ts_r * ts_D + ts_d] = {r.expr(a.q)};",
        "    }",
        "  }",
        "  ts_matmul(ts_qb.get(), ts_D, ts_kt.get(), ts_K, ts_sc.get(), ts_K, ts_n, ts_D, ts_K, "
        "false);",
        *_softmax_rows(r),
        "  ts_matmul(ts_sc.get(), ts_K, ts_vb.get(), ts_E, ts_ob.get(), ts_E, ts_n, ts_K, ts_E, "
        "false);",
        "  for (int64_t ts_r = 0; ts_r < ts_n; ++ts_r) {",
        "    const int64_t ts_i = ts_i0 + ts_r;",
        "    for (int64_t ts_e = 0; ts_e < ts_E; ++ts_e) {",
        f"      {a.out}[{r.offset(r.params[a.out])}] = ts_ob[ts_r * ts_E + ts_e];",
        "    }",
        "  }",
        "  ts_r0 += ts_n;",
        "}",
    ]
    return _library(kernel, r, body)


def _softmax_rows(r: AttentionRenderer) -> list[str]:
    """The block's score rows: scaled and masked (`score`), softmax, then `post` (dropout's
    scale, say) where the match has one."""
    a = r.a
    post = []
    if a.post is not None:
        post = [
            "    for (int64_t ts_j = 0; ts_j < ts_K; ++ts_j) {",
            "      const float ts_p = ts_row[ts_j];",
            f"      ts_row[ts_j] = {r.expr(a.post)};",
            "    }",
        ]
    return [
        "  for (int64_t ts_r = 0; ts_r < ts_n; ++ts_r) {",
        "    const int64_t ts_i = ts_i0 + ts_r;",
        "    (void)ts_i;",
        "    float* __restrict ts_row = ts_sc.get() + ts_r * ts_K;",
        "    float ts_m = -INFINITY;",
        "    for (int64_t ts_j = 0; ts_j < ts_K; ++ts_j) {",
        "      const float ts_s = ts_row[ts_j];",
        f"      const float ts_x = {r.expr(a.score)};",
        "      ts_row[ts_j] = ts_x;",
        "      ts_m = ts_max(ts_m, ts_x);",
        "    }",
        "    float ts_z = 0.0f;",
        "    for (int64_t ts_j = 0; ts_j < ts_K; ++ts_j) {",
        "      const float ts_x = ts_exp(ts_row[ts_j] - ts_m);",
        "      ts_row[ts_j] = ts_x;",
        "      ts_z += ts_x;",
        "    }",
        "    for (int64_t ts_j = 0; ts_j < ts_K; ++ts_j) ts_row[ts_j] = ts_row[ts_j] / ts_z;",
        *post,
        "  }",
    ]


def _library(kernel: Kernel, r: AttentionRenderer, body: list[str]) -> str:
    """The kernel library's source: headers, preludes, the ABI and `ts_run` around `body`."""
    lines = [
        *r.members("attention"),
        "#include <cmath>",
        "#include <cstdint>",
        "#include <memory>",
        "",
        header("cpu_math_coeffs.h"),
        header("cpu_math.h"),
        header("cpu_matmul.h"),
        *([header("cpu_half.h")] if has_half(kernel) else []),
        OPS_PRELUDE,
        f'extern "C" int ts_abi_version(void) {{ return {ABI_VERSION}; }}',
        "",
        'extern "C" void ts_run(const void* const* ts_in, void* const* ts_out, '
        "const int64_t* ts_sym, int64_t ts_begin, int64_t ts_end) {",
        *(f"  {line}" for line in body),
        "}",
    ]
    return "\n".join(lines) + "\n"
