extern "C" __global__ void __launch_bounds__(256) ts_e64484689b682b2d(
    const float* __restrict__ in0,
    const float* __restrict__ in1,
    const float* __restrict__ in2,
    const float* __restrict__ in3,
    float* __restrict__ out0,
    const int64_t D0,
    const int64_t D2,
    const int64_t D3,
    const int64_t ts_first,
    const int64_t ts_units) {
  const int64_t ts_Q = D2;
  const int64_t ts_K = D3;
  constexpr int64_t ts_D = 16;
  constexpr int64_t ts_E = 16;
  constexpr int ts_EPT = (ts_E + 31) / 32;  // value columns per thread (>= 32 threads)
  __shared__ float ts_q[ts_D];
  __shared__ float ts_pt[256];  // the tile's exponentials
  __shared__ float ts_scratch[32];
  for (int64_t r = ts_first + blockIdx.x; r < ts_units; r += gridDim.x) {
    const int64_t ts_bq = r / ts_Q;
    const int64_t ts_i = r - ts_bq * ts_Q;
    const int64_t ts_c0 = (ts_bq / ((4))) % (D0);
    (void)ts_c0;
    const int64_t ts_c1 = (ts_bq / (1)) % (4);
    (void)ts_c1;
    for (int64_t ts_d = threadIdx.x; ts_d < ts_D; ts_d += blockDim.x) {
      ts_q[ts_d] = in0[ts_c0 * (64*D2) + ts_c1 * (16) + ts_i * (64) + ts_d];
    }
    __syncthreads();
    float ts_m = -INFINITY, ts_l = 0.0f;
    float ts_acc[ts_EPT];
    for (int t = 0; t < ts_EPT; ++t) ts_acc[t] = 0.0f;
    for (int64_t ts_j0 = 0; ts_j0 < ts_K; ts_j0 += blockDim.x) {
      const int64_t ts_j = ts_j0 + threadIdx.x;
      float ts_x = -INFINITY;
      if (ts_j < ts_K) {
        float ts_s = 0.0f;
        for (int64_t ts_d = 0; ts_d < ts_D; ++ts_d) {
          ts_s = fmaf(ts_q[ts_d], in1[ts_c0 * (64*D3) + ts_c1 * (16) + ts_j * (64) + ts_d], ts_s);
        }
        ts_x = (ts_s + in3[ts_c1 * (D3*D2) + ts_i * (D3) + ts_j]);
      }
      const float ts_mn = ts_max(ts_m, ts_block_reduce<2>(ts_x, -INFINITY, ts_scratch));
      const float ts_shift = ts_mn == -INFINITY ? 0.0f : ts_mn;
      const float ts_px = ts_j < ts_K ? ts_exp(ts_x - ts_shift) : 0.0f;
      const float ts_p = ts_px;
      ts_pt[threadIdx.x] = ts_p;
      const float ts_tile = ts_block_reduce<0>(ts_px, 0.0f, ts_scratch);  // ts_pt visible
      const float ts_scale = ts_exp(ts_m - ts_shift);
      ts_l = ts_l * ts_scale + ts_tile;
      const int64_t ts_n = ts_K - ts_j0 < blockDim.x ? ts_K - ts_j0 : blockDim.x;
      for (int t = 0; t < ts_EPT; ++t) {
        const int64_t ts_e = threadIdx.x + (int64_t)t * blockDim.x;
        if (ts_e >= ts_E) continue;
        float ts_a = ts_acc[t] * ts_scale;
        for (int64_t ts_jj = 0; ts_jj < ts_n; ++ts_jj) {
          const int64_t ts_j = ts_j0 + ts_jj;
          ts_a = fmaf(ts_pt[ts_jj], in2[ts_c0 * (64*D3) + ts_c1 * (16) + ts_j * (64) + ts_e], ts_a);
        }
        ts_acc[t] = ts_a;
      }
      ts_m = ts_mn;
      __syncthreads();  // the next tile rewrites ts_pt
    }
    for (int t = 0; t < ts_EPT; ++t) {
      const int64_t ts_e = threadIdx.x + (int64_t)t * blockDim.x;
      if (ts_e >= ts_E) continue;
      out0[ts_c0 * (64*D2) + ts_c1 * (16) + ts_i * (64) + ts_e] = ts_K == 0 ? 0.0f : ts_acc[t] / ts_l;
    }
    __syncthreads();  // the next unit rewrites ts_q
  }
}
