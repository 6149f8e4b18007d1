extern "C" int ts_abi_version(void) { return 1; }

extern "C" void ts_run(const void* const* ts_in, void* const* ts_out, const int64_t* ts_sym, int64_t ts_begin, int64_t ts_end) {
  const int64_t D0 = ts_sym[0];
  const int64_t D2 = ts_sym[1];
  const int64_t D3 = ts_sym[2];
  (void)ts_sym;
  const int64_t ts_Q = D2;
  const int64_t ts_K = D3;
  constexpr int64_t ts_D = 16;
  constexpr int64_t ts_E = 16;
  const float* __restrict in0 = static_cast<const float*>(ts_in[0]);
  const float* __restrict in1 = static_cast<const float*>(ts_in[1]);
  const float* __restrict in2 = static_cast<const float*>(ts_in[2]);
  const float* __restrict in3 = static_cast<const float*>(ts_in[3]);
  float* __restrict out0 = static_cast<float*>(ts_out[0]);
  const int64_t ts_rows = (D0) * (4) * (D2);
  const int64_t ts_last = ts_end * 32 < ts_rows ? ts_end * 32 : ts_rows;
  std::unique_ptr<float[]> ts_qb(new float[32 * ts_D]);
  std::unique_ptr<float[]> ts_kt(new float[ts_D * ts_K + 1]);
  std::unique_ptr<float[]> ts_vb(new float[ts_K * ts_E + 1]);
  std::unique_ptr<float[]> ts_sc(new float[32 * ts_K + 1]);
  std::unique_ptr<float[]> ts_ob(new float[32 * ts_E]);
  int64_t ts_kv = -1;  // the batch point whose K and V are in ts_kt, ts_vb
  for (int64_t ts_r0 = ts_begin * 32; ts_r0 < ts_last;) {
    const int64_t ts_bq = ts_r0 / ts_Q;
    const int64_t ts_i0 = ts_r0 - ts_bq * ts_Q;
    int64_t ts_n = ts_Q - ts_i0 < ts_last - ts_r0 ? ts_Q - ts_i0 : ts_last - ts_r0;
    if (ts_n > 32) ts_n = 32;
    const int64_t ts_c0 = (ts_bq / ((4))) % (D0);
    (void)ts_c0;
    const int64_t ts_c1 = (ts_bq / (1)) % (4);
    (void)ts_c1;
    if (ts_bq != ts_kv) {
      for (int64_t ts_j = 0; ts_j < ts_K; ++ts_j) {
        for (int64_t ts_d = 0; ts_d < ts_D; ++ts_d) {
          ts_kt[ts_d * ts_K + ts_j] = in1[ts_c0 * (64*D3) + ts_c1 * (16) + ts_j * (64) + ts_d];
        }
        for (int64_t ts_e = 0; ts_e < ts_E; ++ts_e) {
          ts_vb[ts_j * ts_E + ts_e] = in2[ts_c0 * (64*D3) + ts_c1 * (16) + ts_j * (64) + ts_e];
        }
      }
      ts_kv = ts_bq;
    }
    for (int64_t ts_r = 0; ts_r < ts_n; ++ts_r) {
      const int64_t ts_i = ts_i0 + ts_r;
      (void)ts_i;
      for (int64_t ts_d = 0; ts_d < ts_D; ++ts_d) {
        ts_qb[ts_r * ts_D + ts_d] = in0[ts_c0 * (64*D2) + ts_c1 * (16) + ts_i * (64) + ts_d];
      }
    }
    ts_matmul(ts_qb.get(), ts_D, ts_kt.get(), ts_K, ts_sc.get(), ts_K, ts_n, ts_D, ts_K, false);
    for (int64_t ts_r = 0; ts_r < ts_n; ++ts_r) {
      const int64_t ts_i = ts_i0 + ts_r;
      (void)ts_i;
      float* __restrict ts_row = ts_sc.get() + ts_r * ts_K;
      float ts_m = -INFINITY;
      for (int64_t ts_j = 0; ts_j < ts_K; ++ts_j) {
        const float ts_s = ts_row[ts_j];
        const float ts_x = (ts_s + in3[ts_c1 * (D3*D2) + ts_i * (D3) + ts_j]);
        ts_row[ts_j] = ts_x;
        ts_m = ts_max(ts_m, ts_x);
      }
      float ts_z = 0.0f;
      for (int64_t ts_j = 0; ts_j < ts_K; ++ts_j) {
        const float ts_x = ts_exp(ts_row[ts_j] - ts_m);
        ts_row[ts_j] = ts_x;
        ts_z += ts_x;
      }
      for (int64_t ts_j = 0; ts_j < ts_K; ++ts_j) ts_row[ts_j] = ts_row[ts_j] / ts_z;
    }
    ts_matmul(ts_sc.get(), ts_K, ts_vb.get(), ts_E, ts_ob.get(), ts_E, ts_n, ts_K, ts_E, false);
    for (int64_t ts_r = 0; ts_r < ts_n; ++ts_r) {
      const int64_t ts_i = ts_i0 + ts_r;
      for (int64_t ts_e = 0; ts_e < ts_E; ++ts_e) {
        out0[ts_c0 * (64*D2) + ts_c1 * (16) + ts_i * (64) + ts_e] = ts_ob[ts_r * ts_E + ts_e];
      }
    }
    ts_r0 += ts_n;
  }
}
