extern "C" int ts_abi_version(void) { return 1; }

extern "C" void ts_run(const void* const* ts_in, void* const* ts_out, const int64_t* ts_sym, int64_t ts_begin, int64_t ts_end) {
  const int64_t D0 = ts_sym[0];
  const int64_t ts_C = (32);
  const float* __restrict in0 = static_cast<const float*>(ts_in[0]);
  const float* __restrict in1 = static_cast<const float*>(ts_in[1]);
  const float* __restrict in2 = static_cast<const float*>(ts_in[2]);
  const float* __restrict in3 = static_cast<const float*>(ts_in[3]);
  float* __restrict out0 = static_cast<float*>(ts_out[0]);
  float t0_buf[384];
  (void)ts_sym;
  const int64_t ts_rows = (D0);
  const int64_t ts_last = ts_end * 6 < ts_rows ? ts_end * 6 : ts_rows;
  for (int64_t ts_b0 = ts_begin * 6; ts_b0 < ts_last; ts_b0 += 6) {
  const int64_t ts_b1 = ts_b0 + 6 < ts_last ? ts_b0 + 6 : ts_last;
  float* t0 = t0_buf;
  ts_matmul(in1 + ts_b0 * 16, 16, in3 + 0, 64, t0, 64, ts_b1 - ts_b0, 16, 64, false);
  ts_matmul(in2 + ts_b0 * 32, 32, in3 + 1024, 64, t0, 64, ts_b1 - ts_b0, 32, 64, true);
  const float* __restrict t0w0 = t0;
  for (int64_t r = ts_b0; r < ts_b1; ++r) {
    const int64_t in0_r = r * (32);
    const int64_t in1_r = 0;
    const int64_t in2_r = 0;
    const int64_t in3_r = 0;
    const int64_t out0_r = r * (32);
    const int64_t t0w0_r = (r - ts_b0) * (64);
    {
      #pragma GCC ivdep
      for (int64_t i = 0; i < ts_C; ++i) {
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
    }
  }
  }
}
