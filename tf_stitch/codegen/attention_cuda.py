"""An attention kernel (kernel_ir.Attention) -> CUDA.

A block per query row (the units of the op's launch), as FlashAttention's forward pass in its
simplest form: the block's threads load the row of Q into shared memory, then walk the keys a
tile of `blockDim.x` at a time: each thread computes one score (a dot product over the head
dim) and its epilogue, the block reduces the tile's maximum, rescales its running sum and its
accumulators by exp(old max - new max), and adds the tile's exponentials to the sum and their
products with V (after what the probabilities go through: a factor, a mask) to the
accumulators (each thread accumulates some columns of the value dim). The context row is the
accumulators over the sum, written through the output's strides. No score or probability
reaches global memory, and the keys may be of any length.

A row whose scores are all -inf gives NaN, as TensorFlow's softmax does (the shift of an
all -inf tile is taken as 0 so that a later finite tile is not poisoned by -inf - -inf).
"""

from __future__ import annotations

from tf_stitch.codegen.attention_cpu import AttentionRenderer
from tf_stitch.codegen.cuda_head import BLOCK_THREADS, CudaUnsupported, kernel_head
from tf_stitch.codegen.kernel_ir import Kernel


def emit_attention_cuda(kernel: Kernel) -> str:
    r = AttentionRenderer(kernel)
    a = r.a
    if not isinstance(r.head, int) or not isinstance(r.value, int):
        raise CudaUnsupported(f"{kernel.name}: head dims of unknown size")
    body = [
        *r.sizes(),
        "constexpr int ts_EPT = (ts_E + 31) / 32;  // value columns per thread (>= 32 threads)",
        "__shared__ float ts_q[ts_D];",
        f"__shared__ float ts_pt[{BLOCK_THREADS}];  // the tile's exponentials",
        "__shared__ float ts_scratch[32];",
        "for (int64_t r = ts_first + blockIdx.x; r < ts_units; r += gridDim.x) {",
        "  const int64_t ts_bq = r / ts_Q;",
        "  const int64_t ts_i = r - ts_bq * ts_Q;",
        *(f"  {line}" for line in r.batch_coords("ts_bq")),
        "  for (int64_t ts_d = threadIdx.x; ts_d < ts_D; ts_d += blockDim.x) {",
        f"    ts_q[ts_d] = {r.expr(a.q)};",
        "  }",
        "  __syncthreads();",
        "  float ts_m = -INFINITY, ts_l = 0.0f;",
        "  float ts_acc[ts_EPT];",
        "  for (int t = 0; t < ts_EPT; ++t) ts_acc[t] = 0.0f;",
        "  for (int64_t ts_j0 = 0; ts_j0 < ts_K; ts_j0 += blockDim.x) {",
        "    const int64_t ts_j = ts_j0 + threadIdx.x;",
        "    float ts_x = -INFINITY;",
        "    if (ts_j < ts_K) {",
        "      float ts_s = 0.0f;",
        "      for (int64_t ts_d = 0; ts_d < ts_D; ++ts_d) {",
        f"        ts_s = fmaf(ts_q[ts_d], {r.expr(a.k)}, ts_s);",
        "      }",
        f"      ts_x = {r.expr(a.score)};",
        "    }",
        "    const float ts_mn = ts_max(ts_m, ts_block_reduce<2>(ts_x, -INFINITY, ts_scratch));",
        "    const float ts_shift = ts_mn == -INFINITY ? 0.0f : ts_mn;",
        "    const float ts_px = ts_j < ts_K ? ts_exp(ts_x - ts_shift) : 0.0f;",
        "    const float ts_p = ts_px;",
        "    ts_pt[threadIdx.x] = "
        + ("ts_p;" if a.post is None else f"ts_j < ts_K ? {r.expr(a.post)} : 0.0f;"),
        "    const float ts_tile = ts_block_reduce<0>(ts_px, 0.0f, ts_scratch);  // ts_pt visible",
        "    const float ts_scale = ts_exp(ts_m - ts_shift);",
        "    ts_l = ts_l * ts_scale + ts_tile;",
        "    const int64_t ts_n = ts_K - ts_j0 < blockDim.x ? ts_K - ts_j0 : blockDim.x;",
        "    for (int t = 0; t < ts_EPT; ++t) {",
        "      const int64_t ts_e = threadIdx.x + (int64_t)t * blockDim.x;",
        "      if (ts_e >= ts_E) continue;",
        "      float ts_a = ts_acc[t] * ts_scale;",
        "      for (int64_t ts_jj = 0; ts_jj < ts_n; ++ts_jj) {",
        "        const int64_t ts_j = ts_j0 + ts_jj;",
        f"        ts_a = fmaf(ts_pt[ts_jj], {r.expr(a.v)}, ts_a);",
        "      }",
        "      ts_acc[t] = ts_a;",
        "    }",
        "    ts_m = ts_mn;",
        "    __syncthreads();  // the next tile rewrites ts_pt",
        "  }",
        "  for (int t = 0; t < ts_EPT; ++t) {",
        "    const int64_t ts_e = threadIdx.x + (int64_t)t * blockDim.x;",
        "    if (ts_e >= ts_E) continue;",
        f"    {a.out}[{r.offset(r.params[a.out])}] = ts_K == 0 ? 0.0f : ts_acc[t] / ts_l;",
        "  }",
        "  __syncthreads();  // the next unit rewrites ts_q",
        "}",
    ]
    lines = [
        *r.members("attention, CUDA"),
        *kernel_head(kernel),
        *(f"  {line}" for line in body),
        "}",
    ]
    return "\n".join(lines) + "\n"
