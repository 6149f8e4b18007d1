extern "C" int ts_abi_version(void) { return 1; }

extern "C" void ts_run(const void* const* ts_in, void* const* ts_out, const int64_t* ts_sym, int64_t ts_begin, int64_t ts_end) {
  const int64_t ts_C = (8) * (24);
  const float* __restrict in0 = static_cast<const float*>(ts_in[0]);
  const float* __restrict in1 = static_cast<const float*>(ts_in[1]);
  float* __restrict out0 = static_cast<float*>(ts_out[0]);
  float* __restrict out1 = static_cast<float*>(ts_out[1]);
  (void)ts_sym;
  for (int64_t r = ts_begin; r < ts_end; ++r) {
    const int64_t in0_r = 0;
    const int64_t in1_r = 0;
    const int64_t out0_r = 0;
    const int64_t out1_r = 0;
    {
      #pragma GCC ivdep
      for (int64_t i = 0; i < ts_C; ++i) {
        const float v1 = in0[in0_r + i];
        const float v2 = ts_sigmoid(v1);
        const float v3 = (v2 * 0x1.8000000000000p+1f);
        out0[out0_r + i] = v3;
        const float v4 = in1[in1_r + i];
        const float v5 = (v4 * 0x1.0000000000000p+1f);
        const float v6 = (v5 + 0x1.0000000000000p+0f);
        const float v7 = ts_relu(v6);
        out1[out1_r + i] = v7;
      }
    }
  }
}
