// tf_stitch: the matmul tile of a stitched kernel (written for tf_stitch; no BLAS).
//
// C[rows, n] (+)= A[rows, k] @ B[k, n], all row-major with leading dimensions; `add` adds to C
// (a left operand in several column segments is several calls). Up to six rows at once: each
// 64-column strip of B is loaded once per k and multiplied into 6 x 4 vector accumulators
// (GCC/Clang vector extensions: AVX-512 registers with -march=native on x86, NEON register
// groups on Arm). Measured on one Sapphire Rapids core, 64x256x1024: 126 GFLOP/s (90 with
// four rows). Fewer than 16 columns: dot products of rows of A with rows of Bt (B transposed
// once per call), 16 partial sums each.
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

typedef float ts_v16 __attribute__((vector_size(64)));

static inline ts_v16 ts_load16(const float* p) {
  ts_v16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

static inline void ts_store16(float* p, ts_v16 v) { std::memcpy(p, &v, sizeof v); }

template <int R>
static inline void ts_matmul_rows(const float* __restrict A, int64_t lda,
                                  const float* __restrict B, int64_t ldb, float* __restrict C,
                                  int64_t ldc, int64_t k, int64_t n, bool add) {
  TS_TILE_CONTRACT
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) {
    ts_v16 acc[R][4];
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < 4; ++q) acc[r][q] = add ? ts_load16(C + r * ldc + j + 16 * q) : ts_v16{};
    for (int64_t p = 0; p < k; ++p) {
      const float* b = B + p * ldb + j;
      const ts_v16 b0 = ts_load16(b), b1 = ts_load16(b + 16);
      const ts_v16 b2 = ts_load16(b + 32), b3 = ts_load16(b + 48);
      for (int r = 0; r < R; ++r) {
        const float a = A[r * lda + p];
        acc[r][0] += a * b0;
        acc[r][1] += a * b1;
        acc[r][2] += a * b2;
        acc[r][3] += a * b3;
      }
    }
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < 4; ++q) ts_store16(C + r * ldc + j + 16 * q, acc[r][q]);
  }
  for (; j + 16 <= n; j += 16) {
    ts_v16 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = add ? ts_load16(C + r * ldc + j) : ts_v16{};
    for (int64_t p = 0; p < k; ++p) {
      const ts_v16 b0 = ts_load16(B + p * ldb + j);
      for (int r = 0; r < R; ++r) acc[r] += A[r * lda + p] * b0;
    }
    for (int r = 0; r < R; ++r) ts_store16(C + r * ldc + j, acc[r]);
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

#if !defined(__clang__)
#pragma GCC pop_options
#endif
