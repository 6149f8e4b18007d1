// tf_stitch/codegen/cpu_int.h
//
// Integers as a generated kernel computes them, with TensorFlow's CPU results:
// - arithmetic wraps (two's complement), as TensorFlow's does in practice; it is done in
//   unsigned types here, where C++ defines wrapping (signed overflow is undefined behaviour);
// - FloorDiv / FloorMod round toward negative infinity, TruncateDiv / TruncateMod toward zero;
//   the minimum value divided by -1 is itself (its negation, wrapped) and modulo -1 is 0,
//   where the C operators trap. A divisor of 0 never reaches a kernel: TensorFlow raises
//   for it, so fusion/legality.py fuses divisions by constants without zeros only;
// - shifts clamp the shift amount to [0, bits - 1], as TensorFlow's bitwise kernels do;
// - a float converted to int32 or int64 is truncated toward zero, and NaN or a value out of
//   range gives the minimum value (x86's "integer indefinite", which TensorFlow's CPU kernels
//   give whether vectorized or not); to other integers only values in range are converted
//   (a kernel casts a float to them after a clamp only: TensorFlow's results out of range
//   vary); NaN gives 2^31 as uint32 and 2^63 as uint64, as TensorFlow's CPU casts do, and
//   the minimum value as the narrower integers (TensorFlow's vectorized casts do).
//
// A CUDA kernel (codegen/cuda.py) defines TS_INT_FN as a host and device function first.

#ifndef TF_STITCH_CODEGEN_CPU_INT_H_
#define TF_STITCH_CODEGEN_CPU_INT_H_

#include <cstdint>
#include <limits>
#include <type_traits>

#ifndef TS_INT_FN
#define TS_INT_FN static inline
#endif

// The unsigned type T's arithmetic wraps in: at least 32 bits, so that no operand is promoted
// to (signed) int first.
template <typename T>
using ts_wrap_t = typename std::conditional<sizeof(T) <= 4, uint32_t, uint64_t>::type;

template <typename T>
TS_INT_FN T ts_iadd(T a, T b) {
  return static_cast<T>(static_cast<ts_wrap_t<T>>(a) + static_cast<ts_wrap_t<T>>(b));
}
template <typename T>
TS_INT_FN T ts_isub(T a, T b) {
  return static_cast<T>(static_cast<ts_wrap_t<T>>(a) - static_cast<ts_wrap_t<T>>(b));
}
template <typename T>
TS_INT_FN T ts_imul(T a, T b) {
  return static_cast<T>(static_cast<ts_wrap_t<T>>(a) * static_cast<ts_wrap_t<T>>(b));
}
template <typename T>
TS_INT_FN T ts_ineg(T a) {
  return ts_isub(T(0), a);
}
template <typename T>
TS_INT_FN T ts_iabs(T a) {
  return a < T(0) ? ts_ineg(a) : a;
}
template <typename T>
TS_INT_FN T ts_isign(T a) {
  return static_cast<T>((a > T(0)) - (a < T(0)));
}
template <typename T>
TS_INT_FN T ts_imax(T a, T b) {
  return a < b ? b : a;
}
template <typename T>
TS_INT_FN T ts_imin(T a, T b) {
  return b < a ? b : a;
}
template <typename T>
TS_INT_FN T ts_isqdiff(T a, T b) {
  const T d = ts_isub(a, b);
  return ts_imul(d, d);
}

// Division rounding toward zero; b != 0 (see above).
template <typename T>
TS_INT_FN T ts_trunc_div(T a, T b) {
  if constexpr (std::is_signed<T>::value) {
    if (b == T(-1)) return ts_ineg(a);
  }
  return static_cast<T>(a / b);
}
template <typename T>
TS_INT_FN T ts_trunc_mod(T a, T b) {
  if constexpr (std::is_signed<T>::value) {
    if (b == T(-1)) return T(0);
  }
  return static_cast<T>(a % b);
}
// Division rounding toward negative infinity (TensorFlow's FloorDiv, FloorMod): the
// truncated quotient one less, and the remainder plus the divisor, where the remainder is not
// 0 and its sign is not the divisor's.
template <typename T>
TS_INT_FN T ts_floor_div(T a, T b) {
  if constexpr (std::is_signed<T>::value) {
    const T r = ts_trunc_mod(a, b);
    const T q = ts_trunc_div(a, b);
    return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? static_cast<T>(q - T(1)) : q;
  }
  return static_cast<T>(a / b);
}
template <typename T>
TS_INT_FN T ts_floor_mod(T a, T b) {
  if constexpr (std::is_signed<T>::value) {
    const T r = ts_trunc_mod(a, b);
    return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? ts_iadd(r, b) : r;
  }
  return static_cast<T>(a % b);
}

template <typename T>
TS_INT_FN T ts_clamp_shift(T b) {
  const T bits = static_cast<T>(sizeof(T) * 8 - 1);
  if constexpr (std::is_signed<T>::value) {
    if (b < T(0)) return T(0);
  }
  return b > bits ? bits : b;
}
template <typename T>
TS_INT_FN T ts_lshift(T a, T b) {
  using U = typename std::make_unsigned<T>::type;
  return static_cast<T>(static_cast<ts_wrap_t<T>>(static_cast<U>(a)) << ts_clamp_shift(b));
}
template <typename T>
TS_INT_FN T ts_rshift(T a, T b) {
  return static_cast<T>(a >> ts_clamp_shift(b));
}
template <typename T>
TS_INT_FN T ts_invert(T a) {
  return static_cast<T>(~a);
}

// A float or double converted to integer T (see above); to T narrower than 32 bits or
// unsigned, only values in T's range (or NaN) reach it (fusion/integers.py).
template <typename T, typename F>
TS_INT_FN T ts_f2i(F x) {
  if (std::is_signed<T>::value && sizeof(T) == 8) {
    // -2^63 <= x < 2^63; NaN fails both
    const bool in = x >= F(-9223372036854775808.0) && x < F(9223372036854775808.0);
    return in ? static_cast<T>(x) : static_cast<T>(INT64_MIN);
  }
  if (std::is_signed<T>::value && sizeof(T) == 4) {
    const bool in = x > F(-2147483649.0) && x < F(2147483648.0);
    return in ? static_cast<T>(x) : static_cast<T>(INT32_MIN);
  }
  if (x != x && sizeof(T) >= 4) return static_cast<T>(T(1) << (sizeof(T) * 8 - 1));
  if (sizeof(T) == 8) return static_cast<T>(x);
  // through int64 (every value of T is one), saturated: NaN gives T's minimum
  const bool in = x > F(-9223372036854775808.0) && x < F(9223372036854775808.0);
  const int64_t i = in ? static_cast<int64_t>(x) : INT64_MIN;
  const int64_t lo = static_cast<int64_t>(std::numeric_limits<T>::min());
  const int64_t hi = static_cast<int64_t>(std::numeric_limits<T>::max());
  return static_cast<T>(i < lo ? lo : (i > hi ? hi : i));
}

#endif  // TF_STITCH_CODEGEN_CPU_INT_H_
