// tf_stitch: the matmul tile of a stitched kernel (written for tf_stitch; no BLAS).
//
// C[rows, n] (+)= A[rows, k] @ B[k, n], all row-major with leading dimensions; `add` adds to C
// (a left operand in several column segments is several calls). Up to six rows at once: each
// strip of B's columns is loaded once per k and multiplied into 6 x TS_STRIP vector
// accumulators (GCC/Clang vector extensions), as many as the target has registers for: with
// AVX-512, 16-float vectors, 4 per strip (24 of 32 registers); otherwise (AVX2, NEON) 8-float
// vectors, 2 per strip (12 of 16 AVX2 registers). Measured 64x256x1024 on one core: 126
// GFLOP/s on a Sapphire Rapids (AVX-512); on an AMD EPYC with AVX2 the AVX-512 blocking spilled
// its 48 half-vectors to memory, 3.7 GFLOP/s, and 8-float strips run at 53 (24 with one row,
// whose strips are 8 vectors wide to keep enough multiply-adds in flight). Each element of C
// sums its products in the order of k either way, so the blocking never changes a result.
// Fewer than 16 columns: dot products of rows of A with rows of Bt (B transposed once per
// call), 16 partial sums each.
#include <cstdint>
#include <cstring>

// Kernels are compiled with -ffp-contract=off (each op rounds, as in TensorFlow); the tile's
// multiply-adds are contracted into FMAs here, as BLAS libraries do.
#if defined(__clang__)
#define TS_TILE_CONTRACT _Pragma("clang fp contract(fast)")
#else
#define TS_TILE_CONTRACT
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
#endif

// TS_STRIP(R): vectors per strip of columns for R rows at once. With few rows, more vectors
// per strip keep enough independent multiply-adds in flight to cover the FMA's latency.
#if defined(__AVX512F__)
#define TS_VW 16  // floats per vector
#define TS_STRIP(R) 4
#else
#define TS_VW 8
#define TS_STRIP(R) ((R) >= 4 ? 2 : ((R) == 1 ? 8 : 4))
#endif

typedef float ts_vec __attribute__((vector_size(TS_VW * 4)));

static inline ts_vec ts_loadv(const float* p) {
  ts_vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

static inline void ts_storev(float* p, ts_vec v) { std::memcpy(p, &v, sizeof v); }

template <int R>
static inline void ts_matmul_rows(const float* __restrict A, int64_t lda,
                                  const float* __restrict B, int64_t ldb, float* __restrict C,
                                  int64_t ldc, int64_t k, int64_t n, bool add) {
  TS_TILE_CONTRACT
  constexpr int S = TS_STRIP(R);
  int64_t j = 0;
  for (; j + TS_VW * S <= n; j += TS_VW * S) {
    ts_vec acc[R][S];
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < S; ++q) acc[r][q] = add ? ts_loadv(C + r * ldc + j + TS_VW * q) : ts_vec{};
    for (int64_t p = 0; p < k; ++p) {
      const float* b = B + p * ldb + j;
      ts_vec bv[S];
      for (int q = 0; q < S; ++q) bv[q] = ts_loadv(b + TS_VW * q);
      for (int r = 0; r < R; ++r) {
        const float a = A[r * lda + p];
        for (int q = 0; q < S; ++q) acc[r][q] += a * bv[q];
      }
    }
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < S; ++q) ts_storev(C + r * ldc + j + TS_VW * q, acc[r][q]);
  }
  for (; j + TS_VW <= n; j += TS_VW) {
    ts_vec acc[R];
    for (int r = 0; r < R; ++r) acc[r] = add ? ts_loadv(C + r * ldc + j) : ts_vec{};
    for (int64_t p = 0; p < k; ++p) {
      const ts_vec b0 = ts_loadv(B + p * ldb + j);
      for (int r = 0; r < R; ++r) acc[r] += A[r * lda + p] * b0;
    }
    for (int r = 0; r < R; ++r) ts_storev(C + r * ldc + j, acc[r]);
  }
  for (; j < n; ++j) {
    for (int r = 0; r < R; ++r) {
      float s = add ? C[r * ldc + j] : 0.0f;
      for (int64_t p = 0; p < k; ++p) s += A[r * lda + p] * B[p * ldb + j];
      C[r * ldc + j] = s;
    }
  }
}

static inline void ts_matmul(const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                             int64_t ldc, int64_t rows, int64_t k, int64_t n, bool add) {
  int64_t r = 0;
  for (; r + 6 <= rows; r += 6)
    ts_matmul_rows<6>(A + r * lda, lda, B, ldb, C + r * ldc, ldc, k, n, add);
  const float* a = A + r * lda;
  float* c = C + r * ldc;
  switch (rows - r) {
    case 5: ts_matmul_rows<5>(a, lda, B, ldb, c, ldc, k, n, add); break;
    case 4: ts_matmul_rows<4>(a, lda, B, ldb, c, ldc, k, n, add); break;
    case 3: ts_matmul_rows<3>(a, lda, B, ldb, c, ldc, k, n, add); break;
    case 2: ts_matmul_rows<2>(a, lda, B, ldb, c, ldc, k, n, add); break;
    case 1: ts_matmul_rows<1>(a, lda, B, ldb, c, ldc, k, n, add); break;
    default: break;
  }
}

// Bt[j * ldbt + p] = B[p * ldb + j]: the right operand of a narrow matmul, once per call.
static inline void ts_transpose(const float* B, int64_t ldb, float* Bt, int64_t ldbt, int64_t k,
                                int64_t n) {
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) Bt[j * ldbt + p] = B[p * ldb + j];
}

static inline void ts_matmul_narrow(const float* __restrict A, int64_t lda,
                                    const float* __restrict Bt, int64_t ldbt,
                                    float* __restrict C, int64_t ldc, int64_t rows, int64_t k,
                                    int64_t n, bool add) {
  TS_TILE_CONTRACT
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = A + r * lda;
    for (int64_t j = 0; j < n; ++j) {
      const float* b = Bt + j * ldbt;
      float part[16] = {};
      int64_t p = 0;
      for (; p + 16 <= k; p += 16)
        for (int l = 0; l < 16; ++l) part[l] += a[p + l] * b[p + l];
      float s = add ? C[r * ldc + j] : 0.0f;
      for (int l = 0; l < 16; ++l) s += part[l];
      for (; p < k; ++p) s += a[p] * b[p];
      C[r * ldc + j] = s;
    }
  }
}

#undef TS_VW
#undef TS_STRIP
#if !defined(__clang__)
#pragma GCC pop_options
#endif
