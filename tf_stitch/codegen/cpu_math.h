// tf_stitch/codegen/cpu_math.h
//
// Branch-free float32 elementwise math for generated CPU kernels.
//
// Every public function is `static inline float ts_xxx(float)` whose body uses only
// arithmetic (std::fma only where the target has FMA), comparisons feeding ternary
// selects, integer operations on bit patterns cast through std::memcpy, fabsf and
// copysignf, so that GCC/Clang vectorize loops such as
//     for (i = 0; i < n; ++i) out[i] = ts_exp(in[i]);
// under `-O3 -fno-math-errno -fno-trapping-math` (no -ffast-math needed; NaN, Inf and
// signed-zero semantics are exact).  The error bounds hold with and without FMA
// contraction (-ffp-contract=fast / off).
//
// Error bounds are the maximum errors measured against float64 references (numpy /
// Python `math`) over 3.3e7 inputs spanning the whole float range (the tests in
// tests/codegen/test_cpu_math.py use 1.3e6 and assert <= 4 ulp), in float32 ulps of the
// exact result, wherever that result is a normal float.
// Results that would be subnormal are flushed to +0 by the exp-based functions (exp,
// sigmoid, softplus, erfc), like TF's kernels running with flush-to-zero; subnormal inputs
// are handled exactly (e.g. log(1e-40)).
//
// Special values follow TensorFlow's CPU kernels (tf.math.exp, ..., tf.math.softplus).
// Polynomial and rational coefficients (in cpu_math_coeffs.h) come from
// tools/fit_math_coeffs.py (Lawson minimax fits).

#ifndef TF_STITCH_CODEGEN_CPU_MATH_H_
#define TF_STITCH_CODEGEN_CPU_MATH_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

// A CUDA kernel (codegen/cuda.py) defines TS_MATH_INLINE as a device function first, so that
// GPU and CPU kernels compute the same values.
#ifndef TS_MATH_INLINE
#if defined(__GNUC__) || defined(__clang__)
#define TS_MATH_INLINE static inline __attribute__((always_inline))
#else
#define TS_MATH_INLINE static inline
#endif
#endif

// Its constants (a kernel's source carries that file first, which skips the include).
#ifndef TF_STITCH_CODEGEN_CPU_MATH_COEFFS_H_
#include "cpu_math_coeffs.h"
#endif

namespace ts_detail {

TS_MATH_INLINE uint32_t f2u(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

TS_MATH_INLINE float u2f(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// 2^n for n in [-127, 127]; n == -127 gives +0.
TS_MATH_INLINE float pow2i(int32_t n) { return u2f(static_cast<uint32_t>(n + 127) << 23); }

// Integer n held in t = v * log2(e) + kShift (see kShift).
TS_MATH_INLINE int32_t shifted_int(float t) {
  return static_cast<int32_t>(f2u(t) - kShiftBits);
}

// expm1(r) for |r| <= ln2/2, relative error ~1 ulp.
TS_MATH_INLINE float expm1_poly(float r) {
  float q = kExpm1Q5;
  q = q * r + kExpm1Q4;
  q = q * r + kExpm1Q3;
  q = q * r + kExpm1Q2;
  q = q * r + kExpm1Q1;
  q = q * r + kExpm1Q0;
  return r + (r * r) * q;
}

// exp(x) for x in [kExpLo, 88] (a normal result): one scaling by 2^n, n in [-126, 127].
// NaN propagates.
TS_MATH_INLINE float exp_core(float x) {
  const float t = x * kLog2e + kShift;
  const float n = t - kShift;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  return (1.0f + expm1_poly(r)) * pow2i(shifted_int(t));
}

// exp(x) for x in [kExpLo, 89]: as exp_core but scaled by 2^n, n in [-126, 128], in two
// steps (the first exact), so that exp(x > 88.7228) overflows to inf correctly.
TS_MATH_INLINE float exp_wide(float x) {
  const float t = x * kLog2e + kShift;
  const float n = t - kShift;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  const int32_t ni = shifted_int(t);
  const int32_t n1 = ni >> 1;
  return ((1.0f + expm1_poly(r)) * pow2i(n1)) * pow2i(ni - n1);
}

// log(u) + c for positive, normal, finite u (u * 2^k_adj is the real argument) and a
// small correction c.  Pass c = -0.0f for none (folded away by the compiler).
TS_MATH_INLINE float log_core(float u, float k_adj, float c) {
  const uint32_t iu = f2u(u) - kSqrtHalfBits;
  const float k = static_cast<float>(static_cast<int32_t>(iu) >> 23) + k_adj;
  const float f = u2f((iu & 0x007FFFFFu) + kSqrtHalfBits) - 1.0f;  // m - 1, exact
  float q = kLogQ8;
  q = q * f + kLogQ7;
  q = q * f + kLogQ6;
  q = q * f + kLogQ5;
  q = q * f + kLogQ4;
  q = q * f + kLogQ3;
  q = q * f + kLogQ2;
  q = q * f + kLogQ1;
  q = q * f + kLogQ0;
  return k * kLn2Hi + (f + ((f * f) * q + (k * kLn2Lo + c)));
}

// log1p(e) for e in [0, 1] (or NaN): log(1+e) plus the rounding error of 1+e.
TS_MATH_INLINE float log1p_unit(float e) {
  const float u = 1.0f + e;
  const float c = e - (u - 1.0f);
  return log_core(u, 0.0f, c / u);
}

// fma(a, b, c) with a single rounding where the target has FMA (GCC and Clang vectorize it
// there); elsewhere a*b + c, so only use it where a second rounding is harmless.
#if defined(__FMA__) || defined(__FP_FAST_FMAF) || defined(__ARM_FEATURE_FMA)
#define TS_MATH_HAVE_FMA 1
TS_MATH_INLINE float fma_if_fast(float a, float b, float c) { return std::fma(a, b, c); }
#else
TS_MATH_INLINE float fma_if_fast(float a, float b, float c) { return a * b + c; }
#endif

// Cody-Waite reduction of exp(-a^2) for a in [0, 9.2]: returns r = -a^2 - n*ln2 (|r| <=
// ln2/2 + 1e-5) and t = n + kShift, n in [-122, 0].  -a^2 - n*kLn2Hi is exact before its
// single rounding: with FMA directly; otherwise a^2 = ah^2 + (a - ah)*(a + ah) with ah = a
// truncated to 12 significant bits, so that ah^2 is exact and only the small second term
// is rounded.
TS_MATH_INLINE float reduce_neg_square(float a, float& t) {
  t = (a * a) * -kLog2e + kShift;
  const float n = t - kShift;
#ifdef TS_MATH_HAVE_FMA
  const float r1 = std::fma(-a, a, n * -kLn2Hi);
#else
  const float ah = u2f(f2u(a) & 0xFFFFF000u);
  const float r1 = (-(ah * ah) - n * kLn2Hi) - (a - ah) * (a + ah);
#endif
  return r1 - n * kLn2Lo;
}

}  // namespace ts_detail

// exp(x).  x = n*ln2 + r (Cody-Waite), exp(r) = 1 + r + r^2*Q(r) (degree-7 minimax),
// scaled by 2^n.  Max error 1.0 ulp.  exp(x > 88.7228) = inf; results below FLT_MIN
// (x < -87.3365) are +0, e.g. exp(-inf) = 0.
TS_MATH_INLINE float ts_exp(float x) {
  using namespace ts_detail;
  float xc = x < kExpLo ? kExpLo : x;  // NaN passes through both clamps
  xc = xc > 89.0f ? 89.0f : xc;
  const float r = exp_wide(xc);
  return x < kExpLo ? 0.0f : r;
}

// expm1(x).  Same reduction as ts_exp; expm1(x) = 2^n * (expm1(r) + (1 - 2^-n)), where
// 1 - 2^-n is exact and expm1(r) is the degree-7 minimax polynomial (n = 0 for |x| < ln2/2,
// so tiny x keeps full relative accuracy).  Max error 1.5 ulp.  expm1(-0) = -0,
// expm1(-inf) = -1, overflow to inf above 88.7228.
TS_MATH_INLINE float ts_expm1(float x) {
  using namespace ts_detail;
  float xc = x < -18.0f ? -18.0f : x;  // expm1(-18) rounds to -1
  xc = xc > 89.0f ? 89.0f : xc;
  const float t = xc * kLog2e + kShift;
  const float n = t - kShift;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  const int32_t ni = shifted_int(t);  // in [-26, 128]
  const float u = expm1_poly(r) + (1.0f - pow2i(-(ni > 100 ? 100 : ni)));
  const float res = (u + u) * pow2i(ni - 1);
  return std::fabs(x) < 0x1p-25f ? x : res;  // expm1(x) rounds to x; keeps -0
}

// log(x).  x = 2^k * m, m in [sqrt(1/2), sqrt(2)); log(m) = f + f^2*Q(f), f = m - 1
// (degree-10 minimax); k*ln2 added in two parts.  A subnormal x is its mantissa bits times
// 2^-149, the bits converted to float exactly.  Zero, sign and subnormal are told apart by
// bits, not float compares: TensorFlow's threads run with denormals-are-zero, under which a
// subnormal x compares equal to 0 and x * 2^23 is 0 (log(1e-40) would be -inf).
// Max error 0.9 ulp.  log(+-0) = -inf, log(x < 0) = NaN, log(inf) = inf.
TS_MATH_INLINE float ts_log(float x) {
  using namespace ts_detail;
  const uint32_t bits = f2u(x);
  const uint32_t mag = bits & 0x7FFFFFFFu;
  const bool sub = mag < 0x00800000u;  // zero or subnormal
  const float u = sub ? static_cast<float>(static_cast<int32_t>(mag)) : x;
  float r = log_core(u, sub ? -149.0f : 0.0f, -0.0f);
  r = mag < 0x7F800000u ? r : x;  // +-inf, NaN
  r = (bits >> 31) != 0u && mag != 0u ? kNaN : r;  // negative (-inf too)
  return mag == 0u ? -kInf : r;
}

// log1p(x).  u = 1 + x rounded, c = x - (u - 1) its exact rounding error;
// log1p(x) = log(u) + c/u using the ts_log kernel.  Max error 1.0 ulp.
// log1p(-1) = -inf, log1p(x < -1) = NaN, log1p(+-0) = +-0, log1p(inf) = inf.
TS_MATH_INLINE float ts_log1p(float x) {
  using namespace ts_detail;
  const float u = 1.0f + x;
  const float c = x - (u - 1.0f);
  float r = log_core(u, 0.0f, c / u);
  r = x < kInf ? r : x;  // +inf, NaN
  r = x < -1.0f ? kNaN : r;
  r = x == -1.0f ? -kInf : r;
  return x == 0.0f ? x : r;
}

// tanh(x).  |x| < 0.9: x + x^3*P(x^2) (degree-15 odd minimax); otherwise
// sign(x) * (1 - 2/(exp(2|x|) + 1)) with |x| clamped to 10 (tanh rounds to +-1 there).
// Max error 1.1 ulp.  tanh(+-0) = +-0, tanh(+-inf) = +-1.
TS_MATH_INLINE float ts_tanh(float x) {
  using namespace ts_detail;
  const float ax = std::fabs(x);
  const float x2 = x * x;
  float p = kTanhP6;
  p = p * x2 + kTanhP5;
  p = p * x2 + kTanhP4;
  p = p * x2 + kTanhP3;
  p = p * x2 + kTanhP2;
  p = p * x2 + kTanhP1;
  p = p * x2 + kTanhP0;
  const float small = x + (x * x2) * p;
  const float e = exp_core(2.0f * (ax > 10.0f ? 10.0f : ax));
  const float big = 1.0f - 2.0f / (e + 1.0f);
  const float r = ax < kTanhPolyLimit ? small : (x < 0.0f ? -big : big);
  return x == 0.0f ? x : r;  // -0 + (+0) would lose the sign of zero
}

// sigmoid(x) = 1 / (1 + exp(-x)).  With e = exp(-|x|): 1/(1+e) for x >= 0 and e/(1+e)
// for x < 0, so tiny results keep relative accuracy.  Max error 2.4 ulp.
// sigmoid(-inf) = 0, sigmoid(inf) = 1; results below FLT_MIN are +0.
TS_MATH_INLINE float ts_sigmoid(float x) {
  using namespace ts_detail;
  const float ax = std::fabs(x);
  const float e = exp_core(ax > -kExpLo ? kExpLo : -ax);
  const float r = (x < 0.0f ? e : 1.0f) / (1.0f + e);
  return x < kExpLo ? 0.0f : r;  // results below FLT_MIN are flushed
}

// erf(x).  x*(1/4 + N(x^2)/D(x^2)) (degree-5 rational minimax, evaluated as
// fma(x, N/D, x/4)) for |x| <= kErfSat, sign(x) beyond (erf rounds to +-1 there), and
// x + x*(S0 + S1*x^2) for |x| < 2^-7, where the rounding errors of N/D (~0.88 x) would be
// visible.  Max error 2.6 ulp (3.4 without FMA); below 1 ulp for tiny |x|.
// erf(+-0) = +-0, erf(+-inf) = +-1.
TS_MATH_INLINE float ts_erf(float x) {
  using namespace ts_detail;
  const float ax = std::fabs(x);
  const float y = x * x;
  float n = kErfN5;
  n = n * y + kErfN4;
  n = n * y + kErfN3;
  n = n * y + kErfN2;
  n = n * y + kErfN1;
  n = n * y + kErfN0;
  float d = kErfD5;
  d = d * y + kErfD4;
  d = d * y + kErfD3;
  d = d * y + kErfD2;
  d = d * y + kErfD1;
  d = d * y + kErfD0;
  const float mid = fma_if_fast(x, n / d, x * 0.25f);  // NaN for NaN and huge |x|
  const float small = x + x * (kErfS1 * y + kErfS0);
  const float r = ax < kErfSmall ? small : mid;
  return ax > kErfSat ? std::copysign(1.0f, x) : r;
}

// erfc(x) for all x with one formula and one division.  With a = |x| clamped to kErfcHi:
// erfc(a) = 2^n * c*exp(r) * D(a)/(a*D(a) + N(a)), where -a^2 = n*ln2 + r (exact
// reduction, see reduce_neg_square), c*exp(r) is a degree-6 minimax polynomial
// (c = 1/sqrt(pi)) and D/(a*D + N) a (4,5) rational minimax fit of exp(a^2)*erfc(a)/c:
// N/D ~ c*exp(-a^2)/erfc(a) - a shrinks like 1/(2a), so the rounding errors of N and D
// hardly reach the result.  The scaling by 2^n is an integer add to the exponent field;
// erfc(x) = 2 - erfc(-x) for x < 0 is the final fma(q, -e, 2).  Results below FLT_MIN
// (x > kErfcHi) are +0, without computing subnormals.  Max relative error 2.6e-7
// (2.9e-7 without FMA), max error 3.9 ulp, down to FLT_MIN.  erfc(inf) = 0,
// erfc(-inf) = 2, NaN propagates.
TS_MATH_INLINE float ts_erfc(float x) {
  using namespace ts_detail;
  const float ax = std::fabs(x);
  // Integer min on the bit patterns: unlike a select, it does not lead GCC to evaluate the
  // polynomials at the constant and blend the results.  NaN is clamped here; it propagates
  // through the denominator below, which uses ax.
  const uint32_t ab = f2u(ax), hb = f2u(kErfcHi);
  const float a = u2f(ab < hb ? ab : hb);
  float t;
  const float r = reduce_neg_square(a, t);
  float e = kErfcE6;  // c*exp(r)
  e = e * r + kErfcE5;
  e = e * r + kErfcE4;
  e = e * r + kErfcE3;
  e = e * r + kErfcE2;
  e = e * r + kErfcE1;
  e = e * r + kErfcE0;
  float n = kErfcN4;
  n = n * a + kErfcN3;
  n = n * a + kErfcN2;
  n = n * a + kErfcN1;
  n = n * a + kErfcN0;
  float d = kErfcD4;
  d = d * a + kErfcD3;
  d = d * a + kErfcD2;
  d = d * a + kErfcD1;
  d = d * a + kErfcD0;
  const float q = d / (ax * d + n);
  // e * 2^n with n in [-122, 0] (t << 23 == n << 23 mod 2^32); +0 past kErfcHi.
  const uint32_t sign = f2u(x) & 0x80000000u;
  const uint32_t scaled = ax > kErfcHi ? 0u : f2u(e) + (f2u(t) << 23);
  return fma_if_fast(q, u2f(scaled | sign), u2f(sign >> 1));  // q*e or 2 - q*e
}

// softplus(x) with TensorFlow's formula: t = log(FLT_EPSILON) + 2;
// x > -t ? x : (x < t ? exp(x) : log1p(exp(x))).  The middle branch is evaluated as
// max(x, 0) + log1p(exp(-|x|)) (same value, no cancellation).  Max error 1.7 ulp against
// that formula (the formula itself deviates from log1p(exp(x)) by <= 7 ulp just below t).
TS_MATH_INLINE float ts_softplus(float x) {
  using namespace ts_detail;
  const float ax = std::fabs(x);
  const float e = exp_core(ax > -kExpLo ? kExpLo : -ax);  // exp(-|x|)
  const float mid = (x > 0.0f ? x : 0.0f) + log1p_unit(e);
  const float r = x < kSoftplusThreshold ? (x < kExpLo ? 0.0f : e) : mid;
  return x > -kSoftplusThreshold ? x : r;
}

#undef TS_MATH_INLINE
#undef TS_MATH_HAVE_FMA

#endif  // TF_STITCH_CODEGEN_CPU_MATH_H_
