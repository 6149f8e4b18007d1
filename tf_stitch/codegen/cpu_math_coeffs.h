// tf_stitch/codegen/cpu_math_coeffs.h
//
// The constants of cpu_math.h's functions: the float32 special values, the range limits,
// and the polynomial and rational minimax coefficients, exactly as tools/fit_math_coeffs.py
// prints them (tests/codegen/test_cpu_math.py checks it). A kernel's source carries this
// file right before cpu_math.h.

#ifndef TF_STITCH_CODEGEN_CPU_MATH_COEFFS_H_
#define TF_STITCH_CODEGEN_CPU_MATH_COEFFS_H_

#include <cstdint>
#include <limits>

namespace ts_detail {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

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
// erf(x) = x + x*S(x^2), |x| < kErfSmall; max rel. error 8.6e-10.
constexpr float kErfSmall = 0x1p-7f;
constexpr float kErfS0 = 0x1.06eba8p-3f;
constexpr float kErfS1 = -0x1.811d2ep-2f;
// erf(x) = x*(1/4 + N(x^2)/D(x^2)), |x| <= kErfSat; max rel. error 2.1e-8.
constexpr float kErfSat = 0x1.f5c29p+1f;  // 3.92f: erf(x) rounds to +-1 above 3.9192
constexpr float kErfN0 = 0x1.c1baeap-1f;  // float32(2/sqrt(pi) - 1/4)
constexpr float kErfN1 = 0x1.082e18p-4f;
constexpr float kErfN2 = 0x1.8c9cd8p-6f;
constexpr float kErfN3 = 0x1.a06728p-17f;
constexpr float kErfN4 = -0x1.4b0f18p-18f;
constexpr float kErfN5 = -0x1.f56f76p-18f;
constexpr float kErfD0 = 0x1p+0f;
constexpr float kErfD1 = 0x1.00d5e6p-1f;
constexpr float kErfD2 = 0x1.d28afcp-4f;
constexpr float kErfD3 = 0x1.e91aaap-7f;
constexpr float kErfD4 = 0x1.2f5beep-10f;
constexpr float kErfD5 = 0x1.3fa196p-15f;
// c*exp(r) = c + c*r + r^2*Q(r), |r| <= ln2/2, c = 1/sqrt(pi); max rel. error 3.5e-9.
constexpr float kErfcE0 = 0x1.20dd76p-1f;
constexpr float kErfcE1 = 0x1.20dd76p-1f;
constexpr float kErfcE2 = 0x1.20dd74p-2f;
constexpr float kErfcE3 = 0x1.812668p-4f;
constexpr float kErfcE4 = 0x1.812adep-6f;
constexpr float kErfcE5 = 0x1.35719ap-8f;
constexpr float kErfcE6 = 0x1.98e9fap-11f;
// exp(a^2)*erfc(a)/c = D(a)/(a*D(a) + N(a)), a in [0, 9.2]; max rel. error 1.5e-8.
constexpr float kErfcN0 = 0x1.f9838ep-1f;
constexpr float kErfcN1 = 0x1.44815p-1f;
constexpr float kErfcN2 = 0x1.cab574p-3f;
constexpr float kErfcN3 = 0x1.0e76cep-5f;
constexpr float kErfcN4 = 0x1.80a0d2p-18f;
constexpr float kErfcD0 = 0x1.cp+0f;  // 1.75
constexpr float kErfcD1 = 0x1.2010a4p+1f;
constexpr float kErfcD2 = 0x1.5e4c32p+0f;
constexpr float kErfcD3 = 0x1.c60c6cp-2f;
constexpr float kErfcD4 = 0x1.0fe252p-4f;
// TensorFlow's softplus threshold: log(FLT_EPSILON) + 2, evaluated in float.
constexpr float kSoftplusThreshold = -0x1.be2804p+3f;  // -13.942385f

}  // namespace ts_detail

#endif  // TF_STITCH_CODEGEN_CPU_MATH_COEFFS_H_
