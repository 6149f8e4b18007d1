// tf_stitch/runtime/op/c_api.cc
//
// The C functions tf_stitch calls through ctypes, and the state they set.

#include <algorithm>
#include <chrono>  // NOLINT(build/c++11)
#include <cstdint>
#include <cstring>
#include <string>

#include "common.h"
#include "kernel_files.h"
#include "kernel_library.h"
#include "sha256.h"
#include "tsl/profiler/lib/traceme.h"

namespace tf_stitch {

std::atomic<bool> g_kernel_tracing{false};
std::atomic<CompileFn> g_compile{nullptr};

}  // namespace tf_stitch

// tf_stitch.runtime.op_library registers the compiler of kernel sources that
// are neither in the cache nor carried as a fitting binary (ctypes).
extern "C" __attribute__((visibility("default"))) void tf_stitch_set_compiler(
    tf_stitch::CompileFn compile) {
  tf_stitch::g_compile.store(compile);
}

// tf_stitch.profiler turns the kernel trace events on for its run C (ctypes).
extern "C" __attribute__((visibility("default"))) void
tf_stitch_set_kernel_tracing(int on) {
  tf_stitch::g_kernel_tracing.store(on != 0, std::memory_order_relaxed);
}

// tf_stitch.profiler's calibration (leveled.calibrate_event_cost, ctypes): the
// wall time of `n` host trace events at level 2, each named as the executor
// names an op ("name:Type", built only when recorded). With no profiler
// session active, a loop of level checks; in one, what recording costs.
extern "C" __attribute__((visibility("default"))) int64_t
tf_stitch_time_trace_events(int64_t n, const char* name, const char* type) {
  const std::string op_name(name), op_type(type);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i) {
    tsl::profiler::TraceMe event([&] { return op_name + ":" + op_type; }, 2);
  }
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now() - start)
      .count();
}

// The sha256 the op checks cached libraries with, of the file at `path`, as 64
// hex characters and a NUL into `hex_out` (tests compare it with hashlib's).
extern "C" __attribute__((visibility("default"))) int tf_stitch_sha256_file(
    const char* path, char* hex_out) {
  std::string hex;
  if (!tf_stitch::sha256::OfFile(path, &hex)) return 1;
  std::memcpy(hex_out, hex.c_str(), hex.size() + 1);
  return 0;
}

namespace {

// Copies `text` and a NUL into `out` (at most `size` bytes); returns its length.
int64_t CopyOut(const std::string& text, char* out, int64_t size) {
  if (out != nullptr && size > 0) {
    const size_t n = std::min(text.size(), static_cast<size_t>(size - 1));
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
  }
  return static_cast<int64_t>(text.size());
}

}  // namespace

// The op's own copies of two rules the Python side owns: where the kernel cache
// is (tf_stitch.runtime.cache.cache_dir()) and what this machine is
// (kernel_compiler.cpu_signature()). A process without tf_stitch (TensorFlow
// Serving) loads the op too, so it cannot ask Python; instead
// tests/runtime/test_op_rules.py asks both sides, through these, and compares.
extern "C" __attribute__((visibility("default"))) int64_t tf_stitch_cache_dir(
    char* out, int64_t size) {
  return CopyOut(tf_stitch::CacheDir(), out, size);
}

extern "C" __attribute__((visibility("default"))) int64_t
tf_stitch_cpu_signature(char* out, int64_t size) {
  return CopyOut(tf_stitch::CpuSignature(), out, size);
}
