// tf_stitch/runtime/op/kernel_library.h
//
// Where a kernel's library comes from, in order: the cache entry of its
// `cache_key`; then, for the self-contained nodes of a converted SavedModel,
// the binary the node carries (`binary`, built on a machine whose CPU
// `binary_target` describes), installed into the cache when this CPU has
// every feature that one had; then the node's `source`, compiled on first use
// by the compiler tf_stitch registers (tf_stitch_set_compiler). If none works,
// every reason is returned (the CPU kernel then runs the node's `fallback`
// function where it has one).

#ifndef TF_STITCH_RUNTIME_OP_KERNEL_LIBRARY_H_
#define TF_STITCH_RUNTIME_OP_KERNEL_LIBRARY_H_

#include <string>
#include <vector>

#include "common.h"
#include "tensorflow/core/framework/attr_value.pb.h"

namespace tf_stitch {

// What a node carries besides its cache key (a converted SavedModel's nodes).
struct Embedded {
  std::string source;
  std::string binary;         // the .so built where the model was converted
  std::string binary_target;  // "<machine>\n<cpu flags>" of that machine
  std::vector<tensorflow::NameAttrList> fallback;  // 0 or 1 function
};

// This machine as a carried binary's `binary_target` describes one: its name, a newline, then
// its CPU's feature flags (sorted, one space apart), as
// tf_stitch.runtime.kernel_compiler.cpu_signature() has them.
std::string CpuSignature();

// Finds the kernel's library and sets `run` to its ts_run.
absl::Status ResolveKernel(const Signature& sig, const Embedded& e,
                           RunFn* run);

}  // namespace tf_stitch

#endif  // TF_STITCH_RUNTIME_OP_KERNEL_LIBRARY_H_
