// tf_stitch/codegen/cpu_math.h
//
// Branch-free float32 elementwise math for generated CPU kernels.
//
// Every public function is `static inline float ts_xxx(float)` whose body uses only
// arithmetic, comparisons feeding ternary selects, bit casts through std::memcpy and
// fabsf, so that GCC/Clang vectorize loops such as
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
// Polynomial coefficients come from tools/fit_math_coeffs.py (Lawson minimax fits).

#ifndef TF_STITCH_CODEGEN_CPU_MATH_H_
#define TF_STITCH_CODEGEN_CPU_MATH_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__GNUC__) || defined(__clang__)
#define TS_MATH_INLINE static inline __attribute__((always_inline))
#else
#define TS_MATH_INLINE static inline
#endif

namespace ts_detail {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kMinNormal = std::numeric_limits<float>::min();

// ln(2) split so that n * kLn2Hi is exact for |n| < 512 (kLn2Hi has 15 significant bits).
constexpr float kLn2Hi = 0x1.62e4p-1f;
constexpr float kLn2Lo = 0x1.7f7d1cp-20f;
constexpr float kLog2e = 0x1.715476p+0f;
// Adding 1.5 * 2^23 rounds a float with |v| < 2^22 to an integer held in the low
// mantissa bits (round-to-nearest), without rintf.
constexpr float kShift = 0x1.8p23f;
constexpr uint32_t kShiftBits = 0x4B400000u;
constexpr uint32_t kSqrtHalfBits = 0x3F3504F3u;  // bits of 0.70710677f
// Smallest float x with exp(x) >= FLT_MIN; exp-based results below FLT_MIN are flushed
// to +0 (as TF's flush-to-zero threads do) without computing subnormals, which would
// trigger slow microcode assists on x86 when flush-to-zero is off.
constexpr float kExpLo = -0x1.5d589ep+6f;  // -87.33654f
// Largest float x with erfc(x) >= FLT_MIN.
constexpr float kErfcHi = 0x1.2639bep+3f;  // 9.194549f

// Polynomials printed by tools/fit_math_coeffs.py (lowest degree first).
// expm1(r) = r + r^2*Q(r), |r| <= ln2/2; max rel. error of the rounded fit 4.6e-10.
constexpr float kExpm1Q0 = 0x1p-1f;
constexpr float kExpm1Q1 = 0x1.555554p-3f;
constexpr float kExpm1Q2 = 0x1.5554f4p-5f;
constexpr float kExpm1Q3 = 0x1.1112cep-7f;
constexpr float kExpm1Q4 = 0x1.6d405p-10f;
constexpr float kExpm1Q5 = 0x1.9e8f4ep-13f;
// log(1+f) = f + f^2*Q(f), f in [sqrt(.5)-1, sqrt(2)-1]; max rel. error 4.2e-9.
constexpr float kLogQ0 = -0x1.fffff8p-2f;
constexpr float kLogQ1 = 0x1.55555p-2f;
constexpr float kLogQ2 = -0x1.000434p-2f;
constexpr float kLogQ3 = 0x1.99a42p-3f;
constexpr float kLogQ4 = -0x1.54254p-3f;
constexpr float kLogQ5 = 0x1.226ce4p-3f;
constexpr float kLogQ6 = -0x1.0f4356p-3f;
constexpr float kLogQ7 = 0x1.086b6ep-3f;
constexpr float kLogQ8 = -0x1.38515p-4f;
// tanh(x) = x + x^3*P(x^2), |x| <= 0.9; max rel. error 1.1e-9.
constexpr float kTanhPolyLimit = 0.9f;
constexpr float kTanhP0 = -0x1.55554ep-2f;
constexpr float kTanhP1 = 0x1.110f38p-3f;
constexpr float kTanhP2 = -0x1.b9ca4ep-5f;
constexpr float kTanhP3 = 0x1.62f1ccp-6f;
constexpr float kTanhP4 = -0x1.0ed7bep-7f;
constexpr float kTanhP5 = 0x1.529de4p-9f;
constexpr float kTanhP6 = -0x1.dddad6p-12f;
// erf(x) = x + x*P(x^2), |x| <= 1; max rel. error 1.4e-9.
constexpr float kErfP0 = 0x1.06eba8p-3f;
constexpr float kErfP1 = -0x1.81273ep-2f;
constexpr float kErfP2 = 0x1.ce2ce6p-4f;
constexpr float kErfP3 = -0x1.b7f71ap-6f;
constexpr float kErfP4 = 0x1.53f224p-8f;
constexpr float kErfP5 = -0x1.a3515ep-11f;
constexpr float kErfP6 = 0x1.4771fcp-14f;
// (x+K)*exp(x^2)*erfc(x) = P((x-K)/(x+K)), K = 2, x in [0.5, 10.1]; max rel. error 1.7e-8.
constexpr float kErfcK = 2.0f;
constexpr float kErfcP0 = 0x1.058672p+0f;
constexpr float kErfcP1 = -0x1.5fd386p-1f;
constexpr float kErfcP2 = 0x1.1e2d84p-2f;
constexpr float kErfcP3 = -0x1.2a8876p-5f;
constexpr float kErfcP4 = -0x1.600d4p-6f;
constexpr float kErfcP5 = 0x1.a8335cp-8f;
constexpr float kErfcP6 = 0x1.860d02p-9f;
constexpr float kErfcP7 = -0x1.a63ce4p-11f;
constexpr float kErfcP8 = -0x1.ce96d2p-12f;
// TensorFlow's softplus threshold: log(FLT_EPSILON) + 2, evaluated in float.
constexpr float kSoftplusThreshold = -0x1.be2804p+3f;  // -13.942385f

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

// erf(x) for |x| <= 1.
TS_MATH_INLINE float erf_poly(float x) {
  const float x2 = x * x;
  float p = kErfP6;
  p = p * x2 + kErfP5;
  p = p * x2 + kErfP4;
  p = p * x2 + kErfP3;
  p = p * x2 + kErfP2;
  p = p * x2 + kErfP1;
  p = p * x2 + kErfP0;
  return x + x * p;
}

// erfc(x) for x in [0.5, kErfcHi] (a normal result; P is fitted on [0.5, 10.1]):
// exp(-x^2) * P(t) / (x + K), t = (x - K)/(x + K).
// x^2 = xh^2 + xl*(x + xh) with xh = x truncated to 12 significant bits, so -xh^2 is exact
// and enters the Cody-Waite reduction unrounded.  exp(-x^2) = 2^n * (1 + q) is kept
// unnormalised and P is multiplied by (1 + q) as P + P*q, saving a rounding.
TS_MATH_INLINE float erfc_core(float x) {
  const float xh = u2f(f2u(x) & 0xFFFFF000u);
  const float a = -(xh * xh);
  const float b = -((x - xh) * (x + xh));
  const float t = (a + b) * kLog2e + kShift;
  const float n = t - kShift;
  const float q = expm1_poly(((a - n * kLn2Hi) + b) - n * kLn2Lo);
  const float s = x + kErfcK;
  const float z = (x - kErfcK) / s;
  float p = kErfcP8;
  p = p * z + kErfcP7;
  p = p * z + kErfcP6;
  p = p * z + kErfcP5;
  p = p * z + kErfcP4;
  p = p * z + kErfcP3;
  p = p * z + kErfcP2;
  p = p * z + kErfcP1;
  p = p * z + kErfcP0;
  return ((p + p * q) / s) * pow2i(shifted_int(t));  // n in [-122, 0]
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

// log(x).  x = 2^k * m, m in [sqrt(1/2), sqrt(2)) (subnormals pre-scaled by 2^23);
// log(m) = f + f^2*Q(f), f = m - 1 (degree-10 minimax); k*ln2 added in two parts.
// Max error 0.9 ulp.  log(0) = -inf, log(x < 0) = NaN, log(inf) = inf.
TS_MATH_INLINE float ts_log(float x) {
  using namespace ts_detail;
  const bool sub = x < kMinNormal;
  const float u = sub ? x * 0x1p23f : x;
  float r = log_core(u, sub ? -23.0f : 0.0f, -0.0f);
  r = x < kInf ? r : x;  // +inf, NaN
  r = x < 0.0f ? kNaN : r;
  return x == 0.0f ? -kInf : r;
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

// erf(x).  |x| < 1: x + x*P(x^2) (degree-13 odd minimax); otherwise
// sign(x) * (1 - erfc(|x|)) with the ts_erfc kernel, |x| clamped to 4 (erf rounds to +-1).
// Max error 1.4 ulp.  erf(+-0) = +-0, erf(+-inf) = +-1.
TS_MATH_INLINE float ts_erf(float x) {
  using namespace ts_detail;
  const float ax = std::fabs(x);
  const float small = erf_poly(x);
  const float big = 1.0f - erfc_core(ax > 4.0f ? 4.0f : ax);
  return ax < 1.0f ? small : (x < 0.0f ? -big : big);
}

// erfc(x).  |x| < 0.5: 1 - erf(x); otherwise erfc(|x|) = exp(-x^2) * P(t) / (|x| + 2)
// with t = (|x| - 2)/(|x| + 2) (degree-8 minimax) and exp(-x^2) evaluated from an
// exact split of x^2; erfc(x) = 2 - erfc(-x) for x < 0.  Max error 3.9 ulp, i.e. a
// relative error below 3e-7, down to FLT_MIN; results below FLT_MIN (x > 9.1945) are +0.
// erfc(inf) = 0, erfc(-inf) = 2.
TS_MATH_INLINE float ts_erfc(float x) {
  using namespace ts_detail;
  const float ax = std::fabs(x);
  const float small = 1.0f - erf_poly(x);
  const float c = erfc_core(ax > kErfcHi ? kErfcHi : ax);
  const float big = x < 0.0f ? 2.0f - c : (ax > kErfcHi ? 0.0f : c);
  return ax < 0.5f ? small : big;
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

#endif  // TF_STITCH_CODEGEN_CPU_MATH_H_
