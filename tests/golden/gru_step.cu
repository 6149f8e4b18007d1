extern "C" __global__ void __launch_bounds__(256) ts_7dec4f62eab31db8(
    const float* __restrict__ in0,
    const float* __restrict__ in1,
    const float* __restrict__ in2,
    const float* __restrict__ in3,
    float* __restrict__ out0,
    const int64_t D0,
    const int64_t ts_first,
    const int64_t ts_units) {
  const int64_t ts_C = (32);
  __shared__ float t0_buf[64];
  for (int64_t r = ts_first + blockIdx.x; r < ts_units; r += gridDim.x) {
    const int64_t ts_b0 = r;  // a tile holds this unit's row
    float* t0 = t0_buf;
    for (int64_t j = threadIdx.x; j < 64; j += blockDim.x) {
      float acc = 0.0f;
      const float* a0 = in1 + r * 16;
      for (int64_t q = 0; q < 16; ++q) {
        acc = fmaf(a0[q], in3[(0 + q) * 64 + j], acc);
      }
      const float* a1 = in2 + r * 32;
      for (int64_t q = 0; q < 32; ++q) {
        acc = fmaf(a1[q], in3[(16 + q) * 64 + j], acc);
      }
      t0[j] = acc;
    }
    __syncthreads();  // every thread reads the tiles
    const float* __restrict__ t0w0 = t0;
    const int64_t in0_r = r * (32);
    const int64_t in1_r = 0;
    const int64_t in2_r = 0;
    const int64_t in3_r = 0;
    const int64_t out0_r = r * (32);
    const int64_t t0w0_r = (r - ts_b0) * (64);
    for (int64_t i = threadIdx.x; i < ts_C; i += blockDim.x) {
      const float v1 = t0w0[t0w0_r + i];
      const float v2 = ts_sigmoid(v1);
      const float v3 = in0[in0_r + i];
      const float v4 = (v2 * v3);
      const float v5 = (0x1.0000000000000p+0f - v2);
      const float v6 = t0w0[t0w0_r + i + (32)];
      const float v7 = ts_sigmoid(v6);
      const float v8 = (v7 * v3);
      const float v9 = ts_tanh(v8);
      const float v10 = (v5 * v9);
      const float v11 = (v4 + v10);
      out0[out0_r + i] = v11;
    }
    __syncthreads();  // the next unit reuses the shared buffers
  }
}
