extern "C" int ts_abi_version(void) { return 1; }

extern "C" void ts_run(const void* const* ts_in, void* const* ts_out, const int64_t* ts_sym, int64_t ts_begin, int64_t ts_end) {
  const int64_t ts_C = (128);
  const float* __restrict in0 = static_cast<const float*>(ts_in[0]);
  float* __restrict out0 = static_cast<float*>(ts_out[0]);
  float buf0[128];
  (void)ts_sym;
  for (int64_t r = ts_begin; r < ts_end; ++r) {
    const int64_t in0_r = r * (128);
    const int64_t out0_r = r * (128);
    float r0_val;
    {
      float r0_acc[16];
      for (int l = 0; l < 16; ++l) r0_acc[l] = -INFINITY;
      int64_t c = 0;
      for (; c + 16 <= ts_C; c += 16) {
        for (int64_t l = 0; l < 16; ++l) {
          const int64_t i = c + l;
          const float v1 = in0[in0_r + i];
          r0_acc[l] = ts_max(r0_acc[l], v1);
        }
      }
      for (int64_t l = 0; c + l < ts_C; ++l) {
        const int64_t i = c + l;
        const float v1 = in0[in0_r + i];
        r0_acc[l] = ts_max(r0_acc[l], v1);
      }
      for (int h = 16 / 2; h > 0; h >>= 1)
        for (int l = 0; l < h; ++l) r0_acc[l] = ts_max(r0_acc[l], r0_acc[l + h]);
      r0_val = r0_acc[0];
    }
    const float v2 = r0_val;
    float r1_val;
    {
      float r1_acc[16];
      for (int l = 0; l < 16; ++l) r1_acc[l] = 0.0f;
      int64_t c = 0;
      for (; c + 16 <= ts_C; c += 16) {
        for (int64_t l = 0; l < 16; ++l) {
          const int64_t i = c + l;
          const float v3 = in0[in0_r + i];
          const float v4 = (v3 - v2);
          const float v5 = ts_exp(v4);
          r1_acc[l] = r1_acc[l] + v5;
          buf0[i] = v5;
        }
      }
      for (int64_t l = 0; c + l < ts_C; ++l) {
        const int64_t i = c + l;
        const float v3 = in0[in0_r + i];
        const float v4 = (v3 - v2);
        const float v5 = ts_exp(v4);
        r1_acc[l] = r1_acc[l] + v5;
        buf0[i] = v5;
      }
      for (int h = 16 / 2; h > 0; h >>= 1)
        for (int l = 0; l < h; ++l) r1_acc[l] = r1_acc[l] + r1_acc[l + h];
      r1_val = r1_acc[0];
    }
    const float v6 = r1_val;
    {
      #pragma GCC ivdep
      for (int64_t i = 0; i < ts_C; ++i) {
        const float v7 = buf0[i];
        const float v8 = (v7 / v6);
        out0[out0_r + i] = v8;
      }
    }
  }
}
