// tf_stitch/runtime/op/common.h
//
// What every part of the StitchedKernel op library shares: the versions and
// limits, the kernel library C ABI, the op's attrs decoded and validated (its
// Signature), and status helpers. The parts:
//
//   ops.cc             the ops, StitchedKernel and StitchedKernelAssign, and
//                      their shape function
//   signature.cc       the attrs' compact shape encoding, decoded (the template
//                      ReadSignature is below: it serves both the shape function
//                      and the kernels)
//   kernel_files.{h,cc}    where the cache keeps a kernel, its digest, writing
//                          files atomically
//   kernel_library.{h,cc}  finding a kernel's library: the cache, a binary the
//                          node carries, its source compiled here
//   kernel_base.h      what the CPU and GPU kernels share (inputs, variables,
//                      symbols, outputs)
//   kernel_cpu.cc      the CPU kernel (and its fallback to the original ops)
//   kernel_gpu.cc      the GPU kernel (the CUDA build, through cuda_driver.h)
//   c_api.cc           the C functions tf_stitch calls through ctypes
//   graph_pass.cc      tf_stitch.enable()'s graph optimization pass
//
// A dimension d >= 0 of an encoded shape is static; d < 0 is the symbol
// s = -1 - d. Symbols are bound at run time from the first input dimension
// carrying them; outputs and the work-unit count are computed from static dims
// and bound symbols.
//
// The kernel C ABI, which every kernel library exports:
//
//   extern "C" int ts_abi_version(void);  // must return kKernelAbiVersion
//   extern "C" void ts_run(const void* const* inputs, void* const* outputs,
//                          const int64_t* symbols, int64_t unit_begin,
//                          int64_t unit_end);
//
// outputs[num_outputs] points to an error cell, int64_t[3] = {0, 0, 0}: a
// kernel that gathers rows of a table sets it to {1, index, table rows} (the
// first writer wins) when an index is out of range, and the op fails as
// GatherV2 would.
//
// tf_stitch/runtime/op_library.py compiles these files against the installed
// TensorFlow and caches the result (or setup.py builds it into the package,
// tf_stitch/runtime/prebuilt.py).

#ifndef TF_STITCH_RUNTIME_OP_COMMON_H_
#define TF_STITCH_RUNTIME_OP_COMMON_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensorflow/core/framework/types.pb.h"
#include "tensorflow/core/platform/errors.h"

namespace tf_stitch {

// Bump whenever the op library changes behaviour; op_library.py puts it into
// the cache key of the built op library (together with a hash of the sources).
constexpr int kOpLibraryVersion = 10;

// The version of the kernel library C ABI this op speaks.
constexpr int kKernelAbiVersion = 1;

// Symbols index a dense array passed to ts_run; this bounds its size so that a
// corrupt attr cannot make the op allocate an absurd amount of memory.
constexpr int64_t kMaxSymbols = 1 << 16;

constexpr int kCacheKeyLength = 64;

constexpr int kNeverTraced = 1 << 20;  // a TraceMe level no tracer reaches

using AbiVersionFn = int (*)();
using RunFn = void (*)(const void* const* inputs, void* const* outputs,
                       const int64_t* symbols, int64_t unit_begin,
                       int64_t unit_end);
// Compiles a kernel source (tf_stitch registers one at load): writes the 64
// hex characters of its cache key to key_out and returns 0, or writes a
// NUL-terminated reason to error_out and returns non-zero.
using CompileFn = int (*)(const char* source, int64_t size, char* key_out,
                          char* error_out, int64_t error_size);

// Whether StitchedKernel runs record a trace event (tf_stitch.profile's run C
// switches it on through tf_stitch_set_kernel_tracing, so that its run B
// measures the ops without them). Defined in c_api.cc.
extern std::atomic<bool> g_kernel_tracing;
// The compiler tf_stitch registers (tf_stitch_set_compiler). In c_api.cc.
extern std::atomic<CompileFn> g_compile;

// Status helpers that concatenate their arguments like absl::StrCat.
template <typename... Args>
absl::Status InvalidArgument(const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(args...));
}

template <typename... Args>
absl::Status FailedPrecondition(const Args&... args) {
  return absl::FailedPreconditionError(absl::StrCat(args...));
}

using EncodedShape = std::vector<int64_t>;

inline bool IsSymbol(int64_t d) { return d < 0; }

// -1 - d never overflows for d < 0 (the result is at most INT64_MAX).
inline int64_t SymbolOf(int64_t d) { return -1 - d; }

// Formats an encoded shape as e.g. "[s0, 5]".
std::string FormatEncoded(const EncodedShape& shape);

bool IsLowerHex(const std::string& s);

// Where a symbol gets its run-time value: dimension `dim` of input `input`.
struct Binder {
  int input = -1;
  int dim = -1;
};

// Everything the op needs from its attrs, validated.
struct Signature {
  std::string kernel_name;
  std::string schedule;  // shown in traces
  std::string cache_key;
  std::vector<EncodedShape> inputs;
  std::vector<EncodedShape> outputs;
  EncodedShape units;
  int64_t unit_cost = 0;
  // Rows per unit of work: the kernel's ts_run takes ranges of blocks of rows.
  int64_t block_rows = 1;
  // binders[s] is the first input dim carrying symbol s (input -1 if none).
  std::vector<Binder> binders;
};

// Splits the concatenated `dims` into one shape per entry of `ranks`.
absl::Status SplitShapes(const std::string& what,
                         const std::vector<int64_t>& ranks,
                         const std::vector<int64_t>& dims,
                         std::vector<EncodedShape>* shapes);

// Finds the binding input dim of every symbol and rejects symbols that outputs
// or units use but no input provides.
absl::Status BindSymbolSources(Signature* sig);

// Checks what ReadSignature read (all but the shapes).
absl::Status CheckSignature(const Signature& sig, int64_t num_input_types,
                            int64_t num_input_ranks, int64_t num_outputs,
                            int64_t num_output_ranks);

// Reads and validates all attrs. Works with both OpKernelConstruction and
// InferenceContext, which share GetAttr/num_outputs.
template <typename Context>
absl::Status ReadSignature(Context* ctx, Signature* sig) {
  TF_RETURN_IF_ERROR(ctx->GetAttr("kernel_name", &sig->kernel_name));
  TF_RETURN_IF_ERROR(ctx->GetAttr("schedule", &sig->schedule));
  TF_RETURN_IF_ERROR(ctx->GetAttr("cache_key", &sig->cache_key));
  std::vector<int64_t> input_ranks, input_dims, output_ranks, output_dims;
  TF_RETURN_IF_ERROR(ctx->GetAttr("input_ranks", &input_ranks));
  TF_RETURN_IF_ERROR(ctx->GetAttr("input_dims", &input_dims));
  TF_RETURN_IF_ERROR(ctx->GetAttr("output_ranks", &output_ranks));
  TF_RETURN_IF_ERROR(ctx->GetAttr("output_dims", &output_dims));
  TF_RETURN_IF_ERROR(ctx->GetAttr("unit_dims", &sig->units));
  TF_RETURN_IF_ERROR(ctx->GetAttr("unit_cost", &sig->unit_cost));
  TF_RETURN_IF_ERROR(ctx->GetAttr("block_rows", &sig->block_rows));
  // The data inputs (Tin); a StitchedKernelAssign's variables follow them.
  std::vector<tensorflow::DataType> input_types;
  TF_RETURN_IF_ERROR(ctx->GetAttr("Tin", &input_types));
  TF_RETURN_IF_ERROR(CheckSignature(*sig, input_types.size(),
                                    input_ranks.size(), ctx->num_outputs(),
                                    output_ranks.size()));
  absl::Status status =
      SplitShapes("input", input_ranks, input_dims, &sig->inputs);
  if (status.ok()) {
    status = SplitShapes("output", output_ranks, output_dims, &sig->outputs);
  }
  if (status.ok()) status = BindSymbolSources(sig);
  if (!status.ok()) {
    return InvalidArgument("StitchedKernel '", sig->kernel_name, "': ",
                           status.message());
  }
  return absl::OkStatus();
}

}  // namespace tf_stitch

#endif  // TF_STITCH_RUNTIME_OP_COMMON_H_
