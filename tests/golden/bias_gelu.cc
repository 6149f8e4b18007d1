extern "C" int ts_abi_version(void) { return 1; }

extern "C" void ts_run(const void* const* ts_in, void* const* ts_out, const int64_t* ts_sym, int64_t ts_begin, int64_t ts_end) {
  const int64_t D0 = ts_sym[0];
  const int64_t ts_C = (32);
  const float* __restrict in0 = static_cast<const float*>(ts_in[0]);
  const float* __restrict in1 = static_cast<const float*>(ts_in[1]);
  float* __restrict out0 = static_cast<float*>(ts_out[0]);
  (void)ts_sym;
  for (int64_t r = ts_begin; r < ts_end; ++r) {
    const int64_t in0_r = r * (32);
    const int64_t in1_r = 0;
    const int64_t out0_r = r * (32);
    {
      #pragma GCC ivdep
      for (int64_t i = 0; i < ts_C; ++i) {
        const float v1 = in0[in0_r + i];
        const float v2 = in1[in1_r + i];
        const float v3 = (v1 + v2);
        const float v4 = (0x1.0000000000000p-1f * v3);
        const float v5 = (v3 * v3 * v3);
        const float v6 = (0x1.6e4e260000000p-5f * v5);
        const float v7 = (v3 + v6);
        const float v8 = (0x1.9884540000000p-1f * v7);
        const float v9 = ts_tanh(v8);
        const float v10 = (0x1.0000000000000p+0f + v9);
        const float v11 = (v4 * v10);
        out0[out0_r + i] = v11;
      }
    }
  }
}
