// tf_stitch/codegen/cpu_half.h
//
// float16 and bfloat16 as a generated CPU kernel stores them: tensors of those dtypes are read
// and written in their 16-bit formats and every value is computed in float (as XLA and cuDNN
// do; TensorFlow's reductions of them accumulate in float too). `ts_f16` and `ts_bf16` hold
// the bits and convert to and from float implicitly, so that a kernel reads `const float v =
// x[i];` and writes `y[i] = v;` whatever the tensors' dtypes.
//
// Conversions from float round to nearest, ties to even (as Eigen's half and bfloat16, hence
// TensorFlow's Cast), keep the sign of zeros, infinities and NaNs (quieted), give float16's
// subnormals exactly and overflow to infinity at 65520 and above.
//
// A CUDA kernel (codegen/cuda.py) includes this file too, defining TS_HALF_FN and TS_HALF_METHOD
// as host and device functions first: on a GPU the conversions are the hardware's (cvt with
// round to nearest even, the same values), in the SIMT emulation and on the CPU the portable
// code below.

#ifndef TF_STITCH_CODEGEN_CPU_HALF_H_
#define TF_STITCH_CODEGEN_CPU_HALF_H_

#include <cstdint>
#include <cstring>

#ifndef TS_HALF_FN
#define TS_HALF_FN static inline
#define TS_HALF_METHOD
#endif

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

TS_HALF_FN float ts_bits_to_float(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

TS_HALF_FN uint32_t ts_float_to_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return x;
}

TS_HALF_FN uint16_t ts_f32_to_f16(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  uint32_t x = ts_float_to_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
  if (x >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65536, inf
  if (x >= 0x38800000u) {  // a normal float16 (or one that rounds up to infinity)
    uint32_t h = (x - 0x38000000u) >> 13;  // the exponent rebiased from 127 to 15
    const uint32_t rest = x & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry moves the exponent
    return static_cast<uint16_t>(sign | h);
  }
  if (x < 0x33000000u) return static_cast<uint16_t>(sign);  // below 2^-25: a zero
  // a subnormal float16: the significand in units of 2^-24
  const uint32_t exponent = x >> 23;
  const uint32_t significand = (x & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exponent;  // 14..24
  uint32_t h = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  if (rest > halfway || (rest == halfway && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
#endif
}

TS_HALF_FN float ts_f16_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t significand = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: significand * 2^-24, exact in float
    const float magnitude = static_cast<float>(significand) * 0x1p-24f;
    return ts_bits_to_float(sign | ts_float_to_bits(magnitude));
  }
  if (exponent == 31) return ts_bits_to_float(sign | 0x7f800000u | (significand << 13));
  return ts_bits_to_float(sign | ((exponent + 112u) << 23) | (significand << 13));
#endif
}

TS_HALF_FN uint16_t ts_f32_to_bf16(float f) {
#if defined(__CUDA_ARCH__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  const uint32_t x = ts_float_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
#endif
}

TS_HALF_FN float ts_bf16_to_f32(uint16_t h) {
  return ts_bits_to_float(static_cast<uint32_t>(h) << 16);
}

// A float rounded to the precision of the 16-bit format (a Cast to it, computed in float).
TS_HALF_FN float ts_round_f16(float f) { return ts_f16_to_f32(ts_f32_to_f16(f)); }
TS_HALF_FN float ts_round_bf16(float f) { return ts_bf16_to_f32(ts_f32_to_bf16(f)); }

struct ts_f16 {
  uint16_t bits;
  ts_f16() = default;
  TS_HALF_METHOD ts_f16(float f) : bits(ts_f32_to_f16(f)) {}  // NOLINT: implicit, as stored
  TS_HALF_METHOD operator float() const { return ts_f16_to_f32(bits); }
};

struct ts_bf16 {
  uint16_t bits;
  ts_bf16() = default;
  TS_HALF_METHOD ts_bf16(float f) : bits(ts_f32_to_bf16(f)) {}  // NOLINT: implicit, as stored
  TS_HALF_METHOD operator float() const { return ts_bf16_to_f32(bits); }
};

static_assert(sizeof(ts_f16) == 2 && sizeof(ts_bf16) == 2, "16-bit storage");

#endif  // TF_STITCH_CODEGEN_CPU_HALF_H_
