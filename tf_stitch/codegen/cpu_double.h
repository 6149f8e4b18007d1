// tf_stitch/codegen/cpu_double.h
//
// float64 as a generated kernel computes it: in double, with the functions TensorFlow's double
// kernels use (Eigen's scalar ops, which call the C library's: exp, log1p, tanh, erf, ...),
// and its formulas where TensorFlow has its own (sigmoid as 1 / (1 + exp(-x)), softplus with
// thresholds at log(DBL_EPSILON) + 2, ELU and SELU with exp(x) - 1). The float versions of these names are
// cpu_math.h's; a kernel's expression calls whichever its operands' type selects.
//
// A CUDA kernel (codegen/cuda.py) defines TS_DOUBLE_FN as a host and device function first.

#ifndef TF_STITCH_CODEGEN_CPU_DOUBLE_H_
#define TF_STITCH_CODEGEN_CPU_DOUBLE_H_

#include <cfloat>
#include <cmath>

#ifndef TS_DOUBLE_FN
#define TS_DOUBLE_FN static inline
#endif

TS_DOUBLE_FN double ts_exp(double x) { return std::exp(x); }
TS_DOUBLE_FN double ts_expm1(double x) { return std::expm1(x); }
TS_DOUBLE_FN double ts_log(double x) { return std::log(x); }
TS_DOUBLE_FN double ts_log1p(double x) { return std::log1p(x); }
TS_DOUBLE_FN double ts_tanh(double x) { return std::tanh(x); }
TS_DOUBLE_FN double ts_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
TS_DOUBLE_FN double ts_erf(double x) { return std::erf(x); }
TS_DOUBLE_FN double ts_erfc(double x) { return std::erfc(x); }

TS_DOUBLE_FN double ts_softplus(double x) {
  const double threshold = std::log(DBL_EPSILON) + 2.0;
  if (x > -threshold) return x;
  const double e = std::exp(x);
  return x < threshold ? e : std::log(e + 1.0);
}

// NaN-propagating, as TensorFlow's CPU kernels (the float versions are in the ops prelude).
TS_DOUBLE_FN double ts_max(double a, double b) {
  return a != a ? a : (b != b ? b : (a < b ? b : a));
}
TS_DOUBLE_FN double ts_min(double a, double b) {
  return a != a ? a : (b != b ? b : (b < a ? b : a));
}
// Relu6's bound is a float literal in the op table
TS_DOUBLE_FN double ts_min(double a, float b) { return ts_min(a, static_cast<double>(b)); }
TS_DOUBLE_FN double ts_relu(double a) { return a < 0.0 ? 0.0 : a; }
TS_DOUBLE_FN double ts_sqdiff(double a, double b) {
  const double d = a - b;
  return d * d;
}
TS_DOUBLE_FN double ts_div_no_nan(double a, double b) { return b == 0.0 ? 0.0 : a / b; }
TS_DOUBLE_FN double ts_sign(double a) {
  return a > 0.0 ? 1.0 : (a < 0.0 ? -1.0 : (a == 0.0 ? 0.0 : a));
}
TS_DOUBLE_FN double ts_pow(double a, double b) { return std::pow(a, b); }
// ELU and SELU as TensorFlow's kernels write them: exp(x) - 1, not expm1
TS_DOUBLE_FN double ts_elu(double a) { return a < 0.0 ? std::exp(a) - 1.0 : a; }
TS_DOUBLE_FN double ts_selu(double a) {
  return a < 0.0 ? 1.7580993408473768599402175208123 * (std::exp(a) - 1.0)
                 : 1.0507009873554804934193349852946 * a;
}

#endif  // TF_STITCH_CODEGEN_CPU_DOUBLE_H_
