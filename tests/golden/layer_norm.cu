extern "C" __global__ void __launch_bounds__(256) ts_7bcc1c02522246a1(
    const float* __restrict__ in0,
    float* __restrict__ out0,
    const int64_t D0,
    const int64_t ts_first,
    const int64_t ts_units) {
  const int64_t ts_C = (64);
  __shared__ float ts_scratch[32];
  for (int64_t r = ts_first + blockIdx.x; r < ts_units; r += gridDim.x) {
    const int64_t in0_r = r * (64);
    const int64_t out0_r = r * (64);
    float r0_acc[1] = {0.0f};
    for (int64_t i = threadIdx.x; i < ts_C; i += blockDim.x) {
      const float v1 = in0[in0_r + i];
      r0_acc[0] = r0_acc[0] + v1;
    }
    const float r0_val = ts_block_reduce<0>(r0_acc[0], 0.0f, ts_scratch) / static_cast<float>(ts_C);
    __syncthreads();
    const float v2 = r0_val;
    float r1_acc[1] = {0.0f};
    for (int64_t i = threadIdx.x; i < ts_C; i += blockDim.x) {
      const float v3 = in0[in0_r + i];
      const float v4 = (v3 - v2);
      const float v5 = (v4 * v4);
      r1_acc[0] = r1_acc[0] + v5;
    }
    const float r1_val = ts_block_reduce<0>(r1_acc[0], 0.0f, ts_scratch) / static_cast<float>(ts_C);
    __syncthreads();
    const float v6 = r1_val;
    const float v9 = (v6 + 0x1.4f8b580000000p-17f);
    const float v10 = (1.0f / std::sqrt(v9));
    for (int64_t i = threadIdx.x; i < ts_C; i += blockDim.x) {
      const float v7 = in0[in0_r + i];
      const float v8 = (v7 - v2);
      const float v11 = (v8 * v10);
      const float v12 = (v11 * 0x1.8000000000000p+0f);
      const float v13 = (v12 + 0x1.0000000000000p-2f);
      out0[out0_r + i] = v13;
    }
  }
}
