extern "C" int ts_abi_version(void) { return 1; }

extern "C" void ts_run(const void* const* ts_in, void* const* ts_out, const int64_t* ts_sym, int64_t ts_begin, int64_t ts_end) {
  const int64_t D0 = ts_sym[0];
  const int64_t ts_C = (32);
  const int32_t* __restrict in0 = static_cast<const int32_t*>(ts_in[0]);
  const int32_t* __restrict in1 = static_cast<const int32_t*>(ts_in[1]);
  const float* __restrict in2 = static_cast<const float*>(ts_in[2]);
  const float* __restrict in3 = static_cast<const float*>(ts_in[3]);
  float* __restrict out0 = static_cast<float*>(ts_out[0]);
  (void)ts_sym;
  for (int64_t r = ts_begin; r < ts_end; ++r) {
    const int64_t in0_r = r * (1);
    const int64_t in1_r = r * (1);
    const int64_t out0_r = r * (1);
    const int64_t in2_g = in0[in0_r];
    if (in2_g < 0 || in2_g >= 100) {
      ts_gather_error(ts_out[1], in2_g, 100);
      continue;
    }
    const int64_t in2_r = in2_g * (32);
    const int64_t in3_g = in1[in1_r];
    if (in3_g < 0 || in3_g >= 100) {
      ts_gather_error(ts_out[1], in3_g, 100);
      continue;
    }
    const int64_t in3_r = in3_g * (32);
    float r0_val;
    {
      float r0_acc[16];
      for (int l = 0; l < 16; ++l) r0_acc[l] = 0.0f;
      int64_t c = 0;
      for (; c + 16 <= ts_C; c += 16) {
        for (int64_t l = 0; l < 16; ++l) {
          const int64_t i = c + l;
          const float v1 = in2[in2_r + i];
          const float v2 = in3[in3_r + i];
          const float v3 = (v1 * v2);
          r0_acc[l] = r0_acc[l] + v3;
        }
      }
      for (int64_t l = 0; c + l < ts_C; ++l) {
        const int64_t i = c + l;
        const float v1 = in2[in2_r + i];
        const float v2 = in3[in3_r + i];
        const float v3 = (v1 * v2);
        r0_acc[l] = r0_acc[l] + v3;
      }
      for (int h = 16 / 2; h > 0; h >>= 1)
        for (int l = 0; l < h; ++l) r0_acc[l] = r0_acc[l] + r0_acc[l + h];
      r0_val = r0_acc[0];
    }
    const float v4 = r0_val;
    const float v5 = (-v4);
    const float v6 = ts_softplus(v5);
    const float v7 = (-v6);
    out0[out0_r] = v7;
  }
}
