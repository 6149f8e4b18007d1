extern "C" int ts_abi_version(void) { return 1; }

extern "C" void ts_run(const void* const* ts_in, void* const* ts_out, const int64_t* ts_sym, int64_t ts_begin, int64_t ts_end) {
  const int64_t D0 = ts_sym[0];
  const int64_t ts_C = (16);
  const float* __restrict in0 = static_cast<const float*>(ts_in[0]);
  const float* __restrict in1 = static_cast<const float*>(ts_in[1]);
  const float* __restrict in2 = static_cast<const float*>(ts_in[2]);
  float* __restrict out0 = static_cast<float*>(ts_out[0]);
  float* __restrict out1 = static_cast<float*>(ts_out[1]);
  (void)ts_sym;
  for (int64_t r = ts_begin; r < ts_end; ++r) {
    const int64_t in0_r = r * (16);
    const int64_t in1_r = r * (64);
    const int64_t in2_r = r * (64);
    const int64_t out0_r = r * (16);
    const int64_t out1_r = r * (16);
    {
      #pragma GCC ivdep
      for (int64_t i = 0; i < ts_C; ++i) {
        const float v1 = in1[in1_r + i + (16)];
        const float v2 = in2[in2_r + i + (16)];
        const float v3 = (v1 + v2);
        const float v4 = (v3 + 0x1.99999a0000000p-4f);
        const float v5 = ts_sigmoid(v4);
        const float v6 = in0[in0_r + i];
        const float v7 = (v5 * v6);
        const float v8 = in1[in1_r + i];
        const float v9 = in2[in2_r + i];
        const float v10 = (v8 + v9);
        const float v11 = (v10 + 0x1.99999a0000000p-4f);
        const float v12 = ts_sigmoid(v11);
        const float v13 = in1[in1_r + i + (32)];
        const float v14 = in2[in2_r + i + (32)];
        const float v15 = (v13 + v14);
        const float v16 = (v15 + 0x1.99999a0000000p-4f);
        const float v17 = ts_tanh(v16);
        const float v18 = (v12 * v17);
        const float v19 = (v7 + v18);
        out0[out0_r + i] = v19;
        const float v20 = in1[in1_r + i + (48)];
        const float v21 = in2[in2_r + i + (48)];
        const float v22 = (v20 + v21);
        const float v23 = (v22 + 0x1.99999a0000000p-4f);
        const float v24 = ts_sigmoid(v23);
        const float v25 = ts_tanh(v19);
        const float v26 = (v24 * v25);
        out1[out1_r + i] = v26;
      }
    }
  }
}
