extern "C" int ts_abi_version(void) { return 1; }

extern "C" void ts_run(const void* const* ts_in, void* const* ts_out, const int64_t* ts_sym, int64_t ts_begin, int64_t ts_end) {
  const int64_t D1 = ts_sym[0];
  const int64_t ts_C = (D1) * (7) * (7);
  const float* __restrict in0 = static_cast<const float*>(ts_in[0]);
  float* __restrict out0 = static_cast<float*>(ts_out[0]);
  (void)ts_sym;
  const int64_t ts_rows = (48);
  const int64_t ts_last = ts_end * 32 < ts_rows ? ts_end * 32 : ts_rows;
  for (int64_t r0 = ts_begin * 32; r0 < ts_last;) {
    int64_t nl = ts_last - r0 < 32 ? ts_last - r0 : 32;
    const int64_t ts_run_left = (48) - r0 % (48);
    if (nl > ts_run_left) nl = ts_run_left;
    const int64_t r = r0;
    const int64_t in0_r = r * (1);
    const int64_t out0_r = r * (1);
    float r0_acc[32];
    for (int64_t l = 0; l < nl; ++l) r0_acc[l] = 0.0f;
    for (int64_t i0 = 0; i0 < ts_C; i0 += 256) {
      const int64_t i1 = i0 + 256 < ts_C ? i0 + 256 : ts_C;
      float r0_part[32];
      for (int64_t l = 0; l < nl; ++l) r0_part[l] = 0.0f;
      for (int64_t i = i0; i < i1; ++i) {
        #pragma GCC ivdep
        for (int64_t l = 0; l < nl; ++l) {
          const float v1 = in0[in0_r + l + i * (48)];
          r0_part[l] = r0_part[l] + v1;
        }
      }
      for (int64_t l = 0; l < nl; ++l) r0_acc[l] = r0_acc[l] + r0_part[l];
    }
    float r0_val[32];
    for (int64_t l = 0; l < nl; ++l) r0_val[l] = r0_acc[l] / static_cast<float>(ts_C);
    float v2[32];
    for (int64_t l = 0; l < nl; ++l) {
      v2[l] = r0_val[l];
    }
    float r1_acc[32];
    for (int64_t l = 0; l < nl; ++l) r1_acc[l] = 0.0f;
    for (int64_t i0 = 0; i0 < ts_C; i0 += 256) {
      const int64_t i1 = i0 + 256 < ts_C ? i0 + 256 : ts_C;
      float r1_part[32];
      for (int64_t l = 0; l < nl; ++l) r1_part[l] = 0.0f;
      for (int64_t i = i0; i < i1; ++i) {
        #pragma GCC ivdep
        for (int64_t l = 0; l < nl; ++l) {
          const float v3 = in0[in0_r + l + i * (48)];
          const float v4 = (v3 - v2[l]);
          const float v5 = (v4 * v4);
          r1_part[l] = r1_part[l] + v5;
        }
      }
      for (int64_t l = 0; l < nl; ++l) r1_acc[l] = r1_acc[l] + r1_part[l];
    }
    float r1_val[32];
    for (int64_t l = 0; l < nl; ++l) r1_val[l] = r1_acc[l] / static_cast<float>(ts_C);
    float v6[32];
    float v9[32];
    float v10[32];
    for (int64_t l = 0; l < nl; ++l) {
      v6[l] = r1_val[l];
      v9[l] = (v6[l] + 0x1.0624de0000000p-10f);
      v10[l] = (1.0f / std::sqrt(v9[l]));
    }
    for (int64_t i = 0; i < ts_C; ++i) {
      #pragma GCC ivdep
      for (int64_t l = 0; l < nl; ++l) {
        const float v7 = in0[in0_r + l + i * (48)];
        const float v8 = (v7 - v2[l]);
        const float v11 = (v8 * v10[l]);
        out0[out0_r + l + i * (48)] = v11;
      }
    }
    r0 += nl;
  }
}
