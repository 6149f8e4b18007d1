// StitchedKernel: one generic TensorFlow op that runs a fused kernel compiled
// ahead of time by tf_stitch into a shared library.
//
// The op does not compile anything. Its `cache_key` attr names a library at
// <cache_dir>/kernels/<key[:2]>/<key>.so (built by
// tf_stitch.runtime.kernel_compiler), which exports the kernel C ABI:
//
//   extern "C" int ts_abi_version(void);  // must return kKernelAbiVersion
//   extern "C" void ts_run(const void* const* inputs, void* const* outputs,
//                          const int64_t* symbols, int64_t unit_begin,
//                          int64_t unit_end);
//
// Shapes are described by attrs in a compact encoding: a dimension d >= 0 is
// static, d < 0 is the symbol s = -1 - d. Symbols are bound at run time from
// the first input dimension carrying them; outputs and the work-unit count are
// computed from static dims and bound symbols. The work units are split over
// TensorFlow's intra-op CPU thread pool and each shard calls ts_run once.
//
// outputs[num_outputs] points to an error cell, int64_t[3] = {0, 0, 0}: a
// kernel that gathers rows of a table sets it to {1, index, table rows} (the
// first writer wins) when an index is out of range, and the op fails as
// GatherV2 would.
//
// Where the library comes from, in order: the cache entry of `cache_key`;
// then, for the self-contained nodes of a converted SavedModel, the binary
// the node carries (`binary`, built on a machine whose CPU `binary_target`
// describes), installed into the cache when this CPU has every feature that
// one had; then the node's `source`, compiled on first use by the compiler
// tf_stitch registers (tf_stitch_set_compiler). If none works and the node
// has a `fallback` function (its original TensorFlow ops), the op runs that,
// with one warning per kernel; otherwise construction fails with every reason.
//
// This file is self-contained: tf_stitch/runtime/op_library.py compiles it
// against the installed TensorFlow and caches the result (or setup.py builds
// it into the package, tf_stitch/runtime/prebuilt.py).

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>  // NOLINT(build/c++11)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>  // NOLINT(build/c++11)
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/platform/errors.h"
#include "tensorflow/core/platform/logging.h"
#include "tensorflow/core/util/overflow.h"
#include "tsl/profiler/lib/traceme.h"
#include "tsl/profiler/lib/traceme_encode.h"

#include "sha256.h"

namespace tf_stitch {
namespace {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::TensorShapeUtils;
using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

// Bump whenever this file changes behaviour; op_library.py puts it into the
// cache key of the built op library (together with a hash of this source).
constexpr int kOpLibraryVersion = 8;

// Whether StitchedKernel runs record a trace event (tf_stitch.profile's run C
// switches it on through tf_stitch_set_kernel_tracing, so that its run B
// measures the ops without them).
std::atomic<bool> g_kernel_tracing{false};
constexpr int kNeverTraced = 1 << 20;  // a TraceMe level no tracer reaches

// The version of the kernel library C ABI this op speaks.
constexpr int kKernelAbiVersion = 1;

// Symbols index a dense array passed to ts_run; this bounds its size so that a
// corrupt attr cannot make the op allocate an absurd amount of memory.
constexpr int64_t kMaxSymbols = 1 << 16;

constexpr int kCacheKeyLength = 64;

using AbiVersionFn = int (*)();
using RunFn = void (*)(const void* const* inputs, void* const* outputs,
                       const int64_t* symbols, int64_t unit_begin,
                       int64_t unit_end);
// Compiles a kernel source (tf_stitch registers one at load): writes the 64
// hex characters of its cache key to key_out and returns 0, or writes a
// NUL-terminated reason to error_out and returns non-zero.
using CompileFn = int (*)(const char* source, int64_t size, char* key_out,
                          char* error_out, int64_t error_size);
std::atomic<CompileFn> g_compile{nullptr};

// Status helpers that concatenate their arguments like absl::StrCat.
template <typename... Args>
absl::Status InvalidArgument(const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(args...));
}

template <typename... Args>
absl::Status FailedPrecondition(const Args&... args) {
  return absl::FailedPreconditionError(absl::StrCat(args...));
}

// ----------------------------------------------------------------------------
// Attr encoding.

using EncodedShape = std::vector<int64_t>;

bool IsSymbol(int64_t d) { return d < 0; }

// -1 - d never overflows for d < 0 (the result is at most INT64_MAX).
int64_t SymbolOf(int64_t d) { return -1 - d; }

// Formats an encoded shape as e.g. "[s0, 5]".
std::string FormatEncoded(const EncodedShape& shape) {
  std::vector<std::string> parts;
  parts.reserve(shape.size());
  for (int64_t d : shape) {
    parts.push_back(IsSymbol(d) ? absl::StrCat("s", SymbolOf(d))
                                : absl::StrCat(d));
  }
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

std::string FormatShape(const TensorShape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape.dim_sizes(), ", "), "]");
}

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
                         std::vector<EncodedShape>* shapes) {
  int64_t total = 0;
  for (int64_t rank : ranks) {
    if (rank < 0) {
      return InvalidArgument(what, "_ranks has a negative rank ", rank);
    }
    // Stop once the ranks exceed the dims (written so that it cannot overflow).
    if (rank > static_cast<int64_t>(dims.size()) - total) {
      total = static_cast<int64_t>(dims.size()) + 1;
      break;
    }
    total += rank;
  }
  if (total != static_cast<int64_t>(dims.size())) {
    return InvalidArgument("the ", what, "_ranks [", absl::StrJoin(ranks, ", "),
                           "] do not add up to the ", dims.size(),
                           " entries of ", what, "_dims");
  }
  shapes->clear();
  auto it = dims.begin();
  for (int64_t rank : ranks) {
    shapes->emplace_back(it, it + rank);
    it += rank;
  }
  return absl::OkStatus();
}

bool IsLowerHex(const std::string& s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Returns the number of symbols (max index + 1) referenced by `shapes`, or an
// error if an index is out of range.
absl::Status CountSymbols(const std::vector<const EncodedShape*>& shapes,
                          int64_t* count) {
  *count = 0;
  for (const EncodedShape* shape : shapes) {
    for (int64_t d : *shape) {
      if (!IsSymbol(d)) continue;
      const int64_t s = SymbolOf(d);
      if (s >= kMaxSymbols) {
        return InvalidArgument("symbol index ", s, " exceeds the limit of ",
                               kMaxSymbols - 1);
      }
      *count = std::max(*count, s + 1);
    }
  }
  return absl::OkStatus();
}

// Finds the binding input dim of every symbol and rejects symbols that outputs
// or units use but no input provides.
absl::Status BindSymbolSources(Signature* sig) {
  std::vector<const EncodedShape*> all;
  for (const auto& s : sig->inputs) all.push_back(&s);
  for (const auto& s : sig->outputs) all.push_back(&s);
  all.push_back(&sig->units);
  int64_t num_symbols = 0;
  TF_RETURN_IF_ERROR(CountSymbols(all, &num_symbols));
  sig->binders.assign(num_symbols, Binder{});
  for (int i = 0; i < static_cast<int>(sig->inputs.size()); ++i) {
    const EncodedShape& shape = sig->inputs[i];
    for (int j = 0; j < static_cast<int>(shape.size()); ++j) {
      if (!IsSymbol(shape[j])) continue;
      Binder& binder = sig->binders[SymbolOf(shape[j])];
      if (binder.input < 0) binder = Binder{i, j};
    }
  }
  auto check = [&](const EncodedShape& shape,
                   const std::string& where) -> absl::Status {
    for (int64_t d : shape) {
      if (IsSymbol(d) && sig->binders[SymbolOf(d)].input < 0) {
        return InvalidArgument(
            "symbol s", SymbolOf(d), " used by ", where, " ",
            FormatEncoded(shape),
            " does not appear in any input shape, so it cannot be bound");
      }
    }
    return absl::OkStatus();
  };
  for (int i = 0; i < static_cast<int>(sig->outputs.size()); ++i) {
    TF_RETURN_IF_ERROR(check(sig->outputs[i], absl::StrCat("output ", i)));
  }
  return check(sig->units, "unit_dims");
}

// Reads and validates all attrs. Works with both OpKernelConstruction and
// InferenceContext, which share GetAttr/num_inputs/num_outputs.
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

  const std::string prefix =
      absl::StrCat("StitchedKernel '", sig->kernel_name, "': ");
  // The key becomes part of a file path: insisting on exactly 64 lowercase hex
  // characters also rules out path traversal ("../", "/").
  if (sig->cache_key.size() != kCacheKeyLength || !IsLowerHex(sig->cache_key)) {
    return InvalidArgument(prefix, "cache_key must be ", kCacheKeyLength,
                           " lowercase hex characters, got '", sig->cache_key,
                           "'");
  }
  if (sig->unit_cost < 0) {
    return InvalidArgument(prefix, "unit_cost must be >= 0, got ",
                           sig->unit_cost);
  }
  if (sig->block_rows < 1) {
    return InvalidArgument(prefix, "block_rows must be >= 1, got ",
                           sig->block_rows);
  }
  // The data inputs (Tin); a StitchedKernelAssign's variables follow them.
  std::vector<tensorflow::DataType> input_types;
  TF_RETURN_IF_ERROR(ctx->GetAttr("Tin", &input_types));
  if (input_ranks.size() != input_types.size()) {
    return InvalidArgument(prefix, "Tin has ", input_types.size(),
                           " types but input_ranks has ", input_ranks.size(),
                           " entries");
  }
  if (static_cast<int64_t>(output_ranks.size()) != ctx->num_outputs()) {
    return InvalidArgument(prefix, "Tout has ", ctx->num_outputs(),
                           " types but output_ranks has ", output_ranks.size(),
                           " entries");
  }
  absl::Status status =
      SplitShapes("input", input_ranks, input_dims, &sig->inputs);
  if (status.ok()) {
    status = SplitShapes("output", output_ranks, output_dims, &sig->outputs);
  }
  if (status.ok()) status = BindSymbolSources(sig);
  if (!status.ok()) {
    return InvalidArgument(prefix, status.message());
  }
  return absl::OkStatus();
}

// ----------------------------------------------------------------------------
// Shape function.

absl::Status InferShapes(InferenceContext* c) {
  Signature sig;
  TF_RETURN_IF_ERROR(ReadSignature(c, &sig));
  // The best known dimension for each symbol, merged over all inputs. Each symbol starts
  // from the first dim bound to it, never from an unknown dim shared with other symbols:
  // Grappler's shape refiner records every Merge as an equality, so merging one unknown
  // dim with two symbols' dims would equate them (a batch with a width of 16), and its
  // constant folding would then fold the batch's size.
  std::vector<DimensionHandle> symbol_dims(sig.binders.size());
  std::vector<bool> bound(sig.binders.size(), false);
  std::vector<tensorflow::DataType> types;
  TF_RETURN_IF_ERROR(c->GetAttr("Tin", &types));
  for (int i = 0; i < static_cast<int>(sig.inputs.size()); ++i) {
    const EncodedShape& expected = sig.inputs[i];
    ShapeHandle input = c->input(i);
    if (types[i] == tensorflow::DT_RESOURCE) {  // a variable: its value's shape
      const auto* handle = c->input_handle_shapes_and_types(i);
      if (handle == nullptr || handle->empty()) continue;
      input = (*handle)[0].shape;
    }
    ShapeHandle shape;
    absl::Status status = c->WithRank(input, expected.size(), &shape);
    for (int j = 0; status.ok() && j < static_cast<int>(expected.size()); ++j) {
      DimensionHandle dim = c->Dim(shape, j);
      if (IsSymbol(expected[j])) {
        const int64_t symbol = SymbolOf(expected[j]);
        DimensionHandle& merged = symbol_dims[symbol];
        if (!bound[symbol]) {
          merged = dim;
          bound[symbol] = true;
        } else {
          status = c->Merge(merged, dim, &merged);
        }
      } else if (c->ValueKnown(dim) && c->Value(dim) != expected[j]) {
        status = InvalidArgument("dim ", j, " is not ", expected[j]);
      }
    }
    if (!status.ok()) {
      return InvalidArgument("StitchedKernel '", sig.kernel_name, "': input ",
                             i, " must have shape ", FormatEncoded(expected),
                             ", got ", c->DebugString(input), " (",
                             status.message(), ")");
    }
  }
  for (int i = 0; i < c->num_outputs(); ++i) {
    std::vector<DimensionHandle> dims;
    for (int64_t d : sig.outputs[i]) {
      if (!IsSymbol(d)) {
        dims.push_back(c->MakeDim(d));
      } else if (bound[SymbolOf(d)]) {
        dims.push_back(symbol_dims[SymbolOf(d)]);
      } else {
        dims.push_back(c->UnknownDim());  // each unbound symbol a dim of its own
      }
    }
    c->set_output(i, c->MakeShape(dims));
  }
  return absl::OkStatus();
}

// ----------------------------------------------------------------------------
// Kernel libraries.

// Mirrors tf_stitch.runtime.cache.cache_dir(): $TF_STITCH_CACHE_DIR, else
// $XDG_CACHE_HOME/tf_stitch, else ~/.cache/tf_stitch. Empty variables count as
// unset, exactly as in the Python code.
std::string CacheDir() {
  const char* dir = std::getenv("TF_STITCH_CACHE_DIR");
  if (dir != nullptr && *dir != '\0') return dir;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') return absl::StrCat(xdg, "/tf_stitch");
  std::string home;
  if (const char* env_home = std::getenv("HOME"); env_home != nullptr) {
    home = env_home;
  }
  if (home.empty()) {
    // Without $HOME, ask the password database (as the Python side does).
    struct passwd pwd;
    struct passwd* found = nullptr;
    std::vector<char> buffer(16384);
    const int rc =
        getpwuid_r(getuid(), &pwd, buffer.data(), buffer.size(), &found);
    if (rc == 0 && found != nullptr && found->pw_dir != nullptr) {
      home = found->pw_dir;
    }
  }
  return absl::StrCat(home, "/.cache/tf_stitch");
}

std::string KernelPath(const std::string& key) {
  return absl::StrCat(CacheDir(), "/kernels/", key.substr(0, 2), "/", key,
                      ".so");
}

// Loads the library at `path` once per process and returns its ts_run.
// Handles are never dlclose'd: kernels may be running on other threads, and a
// library stays valid for as long as any graph could refer to it.
absl::Status LoadKernelLibrary(const Signature& sig, const std::string& path,
                               RunFn* run) {
  static std::mutex* mu = new std::mutex;
  static auto* loaded = new std::unordered_map<std::string, RunFn>;
  std::lock_guard<std::mutex> lock(*mu);
  if (auto it = loaded->find(path); it != loaded->end()) {
    *run = it->second;
    return absl::OkStatus();
  }
  const std::string prefix = absl::StrCat("StitchedKernel '", sig.kernel_name,
                                          "' (key ", sig.cache_key, "): ");
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    return FailedPrecondition(
        "the compiled kernel ", sig.cache_key, " for ", sig.kernel_name,
        " is not in ", path,
        "; graph_def = tf_stitch.runtime.ensure_compiled(graph_def) compiles "
        "the graph's kernels on this machine and returns it with their keys "
        "(the cache directory comes from $TF_STITCH_CACHE_DIR, else "
        "$XDG_CACHE_HOME/tf_stitch, else ~/.cache/tf_stitch)");
  }
  dlerror();  // Clear any stale error.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return FailedPrecondition(prefix, "dlopen(", path, ") failed: ",
                              err != nullptr ? err : "unknown error");
  }
  auto resolve = [&](const char* name, void** out) -> absl::Status {
    dlerror();
    *out = dlsym(handle, name);
    if (*out == nullptr) {
      const char* err = dlerror();
      return FailedPrecondition(prefix, "symbol ", name, " not found in ", path,
                                ": ", err != nullptr ? err : "null symbol");
    }
    return absl::OkStatus();
  };
  void* abi_symbol = nullptr;
  void* run_symbol = nullptr;
  TF_RETURN_IF_ERROR(resolve("ts_abi_version", &abi_symbol));
  TF_RETURN_IF_ERROR(resolve("ts_run", &run_symbol));
  const int abi = reinterpret_cast<AbiVersionFn>(abi_symbol)();
  if (abi != kKernelAbiVersion) {
    return FailedPrecondition(prefix, path, " has kernel ABI version ", abi,
                              " but this op (library version ",
                              kOpLibraryVersion, ") expects ",
                              kKernelAbiVersion, "; recompile it");
  }
  *run = reinterpret_cast<RunFn>(run_symbol);
  loaded->emplace(path, *run);
  return absl::OkStatus();
}

// Where tf_stitch.runtime.integrity records a cached library's sha256.
std::string DigestPath(const std::string& library) {
  return library.substr(0, library.rfind('.')) + ".sha256";
}

// Whether the library at `path` matches the digest recorded beside it. One
// without a readable digest is never used, as on the Python side: it may be
// another kernel's library, or one whose build or install did not finish.
absl::Status CheckDigest(const std::string& path) {
  std::ifstream in(DigestPath(path));
  std::string recorded;
  if (!(in >> recorded) || recorded.empty()) {
    return FailedPrecondition("the cached library ", path,
                              " has no sha256 recorded beside it (not trusted)");
  }
  std::string actual;
  if (!sha256::OfFile(path, &actual)) {
    return FailedPrecondition("cannot read ", path);
  }
  if (actual != recorded) {
    return FailedPrecondition(
        "the cached library ", path, " does not match the sha256 recorded "
        "beside it (corrupted or truncated)");
  }
  return absl::OkStatus();
}

// ----------------------------------------------------------------------------
// Where a kernel's library comes from when the cache does not have it.

// What a node carries besides its cache key (a converted SavedModel's nodes).
struct Embedded {
  std::string source;
  std::string binary;         // the .so built where the model was converted
  std::string binary_target;  // "<machine>\n<cpu flags>" of that machine
  std::vector<tensorflow::NameAttrList> fallback;  // 0 or 1 function
};

absl::Status ReadEmbedded(OpKernelConstruction* ctx, Embedded* e) {
  TF_RETURN_IF_ERROR(ctx->GetAttr("source", &e->source));
  TF_RETURN_IF_ERROR(ctx->GetAttr("binary", &e->binary));
  TF_RETURN_IF_ERROR(ctx->GetAttr("binary_target", &e->binary_target));
  TF_RETURN_IF_ERROR(ctx->GetAttr("fallback", &e->fallback));
  if (e->fallback.size() > 1) {
    return InvalidArgument("fallback has ", e->fallback.size(),
                           " functions; a StitchedKernel has at most one");
  }
  return absl::OkStatus();
}

std::set<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::set<std::string> words;
  for (std::string w; in >> w;) words.insert(w);
  return words;
}

// This machine as tf_stitch.runtime.kernel_compiler.cpu_signature() has it:
// the machine name, then the `flags` line of /proc/cpuinfo.
std::pair<std::string, std::set<std::string>> ThisCpu() {
  struct utsname name;
  std::string machine = uname(&name) == 0 ? name.machine : "";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("flags", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        return {machine, Words(line.substr(colon + 1))};
      }
    }
  }
  return {machine, {}};
}

// Why the binary built for `target` cannot run here ("" if it can): another
// machine type, or CPU features this CPU lacks (it was built -march=native).
std::string TargetMismatch(const std::string& target) {
  const size_t newline = target.find('\n');
  const std::string machine = target.substr(0, newline);
  const std::set<std::string> needed =
      newline == std::string::npos ? std::set<std::string>{}
                                   : Words(target.substr(newline + 1));
  static const auto* here =
      new std::pair<std::string, std::set<std::string>>(ThisCpu());
  if (machine != here->first) {
    return absl::StrCat("it was built for ", machine, ", this is ",
                        here->first);
  }
  std::vector<std::string> missing;
  for (const std::string& flag : needed) {
    if (!here->second.count(flag)) missing.push_back(flag);
  }
  if (missing.empty()) return "";
  if (missing.size() > 8) {
    missing.resize(8);
    missing.push_back("...");
  }
  return absl::StrCat("this CPU lacks ", absl::StrJoin(missing, " "),
                      " that the CPU it was built on has");
}

absl::Status MakeDirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i != dir.size() && dir[i] != '/') continue;
    const std::string prefix = dir.substr(0, i);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return FailedPrecondition("cannot create ", prefix, ": ",
                                std::strerror(errno));
    }
  }
  return absl::OkStatus();
}

// `pid<PID>@<host>`: the writer in the name of every temporary file, as
// tf_stitch/runtime/leftovers.py writes and sweeps them.
std::string OwnerTag() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::string clean;
  for (const char* c = host; *c != '\0' && clean.size() < 32; ++c) {
    clean.push_back(std::isalnum(static_cast<unsigned char>(*c)) || *c == '-' ? *c : '-');
  }
  return absl::StrCat("pid", getpid(), "@", clean);
}

// Writes `data` to a new file `<prefix>XXXXXX<suffix>` (flushed to disk) and
// sets `path` to its name.
absl::Status WriteTemp(const std::string& prefix, const std::string& suffix,
                       const std::string& data, std::string* path) {
  std::string pattern = absl::StrCat(prefix, "XXXXXX", suffix);
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  const int fd = mkstemps(name.data(), static_cast<int>(suffix.size()));
  if (fd < 0) {
    return FailedPrecondition("cannot create ", pattern, ": ",
                              std::strerror(errno));
  }
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = write(fd, data.data() + written, data.size() - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  const bool ok = written == data.size() && fsync(fd) == 0;
  const std::string why = std::strerror(errno);
  close(fd);
  if (!ok) {
    unlink(name.data());
    return FailedPrecondition("cannot write ", name.data(), ": ", why);
  }
  *path = name.data();
  return absl::OkStatus();
}

// Writes `data` to `path` through a temporary file in the same directory and
// an atomic rename, so that readers see no file or the whole file.
absl::Status WriteAtomically(const std::string& path, const std::string& data) {
  std::string tmp;
  TF_RETURN_IF_ERROR(
      WriteTemp(absl::StrCat(path, ".", OwnerTag(), "."), ".tmp", data, &tmp));
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    unlink(tmp.c_str());
    return FailedPrecondition("cannot write ", path, ": ", why);
  }
  return absl::OkStatus();
}

// Loads the carried binary and, once it has loaded, publishes it where the
// cache keeps `key` (its source beside it, as the Python side does), so that a
// binary that does not load never reaches the cache. Where the cache cannot be
// written, the binary is loaded from a file in $TMPDIR (else /tmp), removed
// once loaded.
absl::Status LoadCarriedBinary(const Signature& sig, const Embedded& e,
                               RunFn* run) {
  const std::string path = KernelPath(sig.cache_key);
  const std::string dir = path.substr(0, path.rfind('/'));
  std::string tmp;
  bool in_cache = MakeDirs(dir).ok() &&
                  WriteTemp(absl::StrCat(path, ".", OwnerTag(), "."), ".tmp.so",
                            e.binary, &tmp)
                      .ok();
  if (!in_cache) {
    const char* tmpdir = std::getenv("TMPDIR");
    TF_RETURN_IF_ERROR(WriteTemp(
        absl::StrCat(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp",
                     "/tf_stitch_kernel_", OwnerTag(), "_"),
        ".so", e.binary, &tmp));
  }
  const absl::Status status = LoadKernelLibrary(sig, tmp, run);
  if (status.ok() && in_cache) {
    std::string cc = path;
    cc.replace(cc.size() - 3, 3, ".cc");
    sha256::Hasher hasher;
    hasher.Update(reinterpret_cast<const unsigned char*>(e.binary.data()),
                  e.binary.size());
    // The digest goes first, so that the library is never in place without
    // it (a digest left without its library only makes the next process
    // install the carried binary again).
    if (WriteAtomically(cc, e.source).ok() &&
        WriteAtomically(DigestPath(path), hasher.HexDigest() + "\n").ok() &&
        rename(tmp.c_str(), path.c_str()) == 0) {
      return status;
    }
  }
  unlink(tmp.c_str());
  return status;
}

// Compiles the node's source through the registered compiler; sets `key`.
absl::Status CompileSource(const Embedded& e, std::string* key) {
  const CompileFn compile = g_compile.load();
  if (compile == nullptr) {
    return FailedPrecondition(
        "no compiler is registered (tf_stitch registers one when it loads "
        "this op library)");
  }
  char key_out[kCacheKeyLength + 1] = {0};
  std::vector<char> error(4096, '\0');
  if (compile(e.source.data(), static_cast<int64_t>(e.source.size()), key_out,
              error.data(), static_cast<int64_t>(error.size())) != 0) {
    return FailedPrecondition(error.data());
  }
  *key = std::string(key_out, kCacheKeyLength);
  if (!IsLowerHex(*key)) {
    return FailedPrecondition("the compiler returned the key '", *key, "'");
  }
  return absl::OkStatus();
}

// Finds the kernel's library: the cache, then the carried binary, then its
// source compiled here. Returns every reason if none works.
absl::Status ResolveKernel(const Signature& sig, const Embedded& e,
                           RunFn* run) {
  const std::string cached = KernelPath(sig.cache_key);
  std::vector<std::string> reasons;
  absl::Status status;
  struct stat info;
  const bool exists = stat(cached.c_str(), &info) == 0;
  if (exists) {
    status = CheckDigest(cached);
    if (status.ok()) status = LoadKernelLibrary(sig, cached, run);
    if (status.ok()) return status;
    reasons.push_back(std::string(status.message()));
  } else {
    reasons.push_back(absl::StrCat("it is not in the cache (", cached, ")"));
  }
  if (e.binary.empty() && e.fallback.empty()) {
    // A node of an optimized graph, not of a converted SavedModel: its kernels
    // are compiled by ensure_compiled, which the error names.
    if (!status.ok()) {
      return FailedPrecondition(
          "StitchedKernel '", sig.kernel_name, "': ", status.message(),
          "; tf_stitch.runtime.ensure_compiled(graph_def) compiles it again");
    }
    return LoadKernelLibrary(sig, cached, run);
  }
  if (e.binary.empty()) {
    reasons.push_back("the node carries no binary");
  } else if (std::string mismatch = TargetMismatch(e.binary_target);
             !mismatch.empty()) {
    reasons.push_back(absl::StrCat("the binary it carries does not fit this "
                                   "machine: ", mismatch));
  } else {
    status = LoadCarriedBinary(sig, e, run);
    if (status.ok()) return status;
    reasons.push_back(absl::StrCat("the binary it carries: ", status.message()));
  }
  if (e.source.empty()) {
    reasons.push_back("the node carries no source");
  } else {
    std::string key;
    status = CompileSource(e, &key);
    if (status.ok()) status = LoadKernelLibrary(sig, KernelPath(key), run);
    if (status.ok()) return status;
    reasons.push_back(
        absl::StrCat("compiling its source here failed: ", status.message()));
  }
  return FailedPrecondition("StitchedKernel '", sig.kernel_name,
                            "' cannot load its kernel: ",
                            absl::StrJoin(reasons, "; "));
}

// ----------------------------------------------------------------------------
// The kernel.

// The shared locks of the variables a kernel reads in place, taken in order of
// their mutexes' addresses (as TensorFlow's ops that lock several variables
// do, so that no two lockers wait on each other) and held until it has run (its
// GPU launch is ordered before any later write on the stream).
class VariableLocks {
 public:
  // The variable behind resource input `input`, locked by Lock().
  absl::Status Add(OpKernelContext* ctx, int input) {
    tensorflow::core::RefCountPtr<tensorflow::Var> var;
    TF_RETURN_IF_ERROR(tensorflow::LookupResource(
        ctx, tensorflow::HandleFromInput(ctx, input), &var));
    inputs_.emplace_back(input, var.get());
    refs_.push_back(std::move(var));
    return absl::OkStatus();
  }

  // Locks every variable once and reads each resource input's value.
  absl::Status Lock(std::vector<Tensor>* values) {
    for (const auto& [input, var] : inputs_) held_.push_back(var);
    std::sort(held_.begin(), held_.end(),
              [](tensorflow::Var* a, tensorflow::Var* b) {
                return a->mu() < b->mu();
              });
    held_.erase(std::unique(held_.begin(), held_.end()), held_.end());
    for (tensorflow::Var* v : held_) v->mu()->lock_shared();
    for (const auto& [input, var] : inputs_) {
      if (!var->is_initialized || !var->tensor()->IsInitialized()) {
        return tensorflow::errors::FailedPrecondition(
            "StitchedKernel input ", input,
            " is a variable that is not initialized");
      }
      (*values)[input] = *var->tensor();
    }
    return absl::OkStatus();
  }

  ~VariableLocks() {
    for (tensorflow::Var* v : held_) v->mu()->unlock_shared();
  }

 private:
  std::vector<std::pair<int, tensorflow::Var*>> inputs_;
  std::vector<tensorflow::core::RefCountPtr<tensorflow::Var>> refs_;
  std::vector<tensorflow::Var*> held_;
};

// What the CPU and GPU kernels share: the validated signature, binding the
// symbols from the inputs, output shapes and the number of work units.
class StitchedKernelBase : public OpKernel {
 public:
  explicit StitchedKernelBase(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadSignature(ctx, &sig_));
    OP_REQUIRES_OK(ctx, ReadAssignments(ctx));
  }

 protected:
  // A StitchedKernelAssign's variables: its inputs after the data inputs are
  // resource handles, and output assign_outputs_[j] becomes the value of the
  // variable of the j-th.
  absl::Status ReadAssignments(OpKernelConstruction* ctx) {
    const int data_inputs = static_cast<int>(sig_.inputs.size());
    if (ctx->HasAttr("assign_outputs")) {
      TF_RETURN_IF_ERROR(ctx->GetAttr("assign_outputs", &assign_outputs_));
      TF_RETURN_IF_ERROR(ctx->GetAttr("validate_shapes", &validate_shapes_));
    }
    validate_shapes_.resize(assign_outputs_.size(), false);
    const std::string prefix =
        absl::StrCat("StitchedKernel '", sig_.kernel_name, "': ");
    if (static_cast<int>(assign_outputs_.size()) !=
        ctx->num_inputs() - data_inputs) {
      return InvalidArgument(prefix, "assign_outputs has ",
                             assign_outputs_.size(), " entries for ",
                             ctx->num_inputs() - data_inputs, " variables");
    }
    std::set<int64_t> seen;
    for (size_t j = 0; j < assign_outputs_.size(); ++j) {
      const int64_t o = assign_outputs_[j];
      if (o < 0 || o >= ctx->num_outputs() || !seen.insert(o).second) {
        return InvalidArgument(prefix, "assign_outputs[", j, "] = ", o,
                               " is not a distinct output index");
      }
      if (ctx->input_type(data_inputs + j) != tensorflow::DT_RESOURCE) {
        return InvalidArgument(prefix, "input ", data_inputs + j,
                               " must be a variable's resource handle");
      }
    }
    return absl::OkStatus();
  }

  // Makes each assigned output its variable's value, as AssignVariableOp does:
  // under the variable's exclusive lock, the variable takes over the output's
  // buffer (which nothing else reads), or a copy of it where a sparse access
  // has put the variable in copy-on-read mode (no tensor may alias it then).
  // Called once the outputs are computed, after the read locks are released.
  absl::Status AssignVariables(OpKernelContext* ctx) {
    const int data_inputs = static_cast<int>(sig_.inputs.size());
    for (size_t j = 0; j < assign_outputs_.size(); ++j) {
      const Tensor& value = *ctx->mutable_output(assign_outputs_[j]);
      tensorflow::core::RefCountPtr<tensorflow::Var> var;
      TF_RETURN_IF_ERROR(tensorflow::LookupOrCreateResource<tensorflow::Var>(
          ctx, tensorflow::HandleFromInput(ctx, data_inputs + j), &var,
          [&value](tensorflow::Var** made) {
            *made = new tensorflow::Var(value.dtype());
            return absl::OkStatus();
          }));
      tensorflow::mutex_lock lock(*var->mu());
      if (var->tensor()->dtype() != value.dtype()) {
        return InvalidArgument(
            "StitchedKernel '", sig_.kernel_name, "': variable input ",
            data_inputs + j, " holds ",
            tensorflow::DataTypeString(var->tensor()->dtype()),
            ", cannot assign it ", tensorflow::DataTypeString(value.dtype()));
      }
      if (validate_shapes_[j] && var->is_initialized &&
          !var->tensor()->shape().IsSameSize(value.shape())) {
        return InvalidArgument(
            "StitchedKernel '", sig_.kernel_name, "': variable input ",
            data_inputs + j, " has shape ", var->tensor()->shape().DebugString(),
            ", cannot assign it a value of shape ", value.shape().DebugString());
      }
      if (var->copy_on_read_mode.load()) {
        Tensor copy;
        TF_RETURN_IF_ERROR(
            ctx->allocate_temp(value.dtype(), value.shape(), &copy));
        TF_RETURN_IF_ERROR(CopyTensor(ctx, value, &copy));
        *var->tensor() = copy;
      } else {
        *var->tensor() = value;
      }
      var->is_initialized = true;
    }
    return absl::OkStatus();
  }

  // Copies `from` into `to` (same type and size) on the op's device.
  virtual absl::Status CopyTensor(OpKernelContext* ctx, const Tensor& from,
                                  Tensor* to) {
    if (from.TotalBytes() > 0) {
      std::memcpy(to->data(), from.data(), from.TotalBytes());
    }
    return absl::OkStatus();
  }

  // The tensors the kernel reads: its inputs, where a resource input (a live
  // variable the function does not write) is the variable's tensor, read in
  // place under its shared lock as ResourceGather reads it. A ReadVariableOp
  // would copy the whole variable once a sparse access (a gather, a scatter)
  // has put it in copy-on-read mode.
  absl::Status ReadInputs(OpKernelContext* ctx, std::vector<Tensor>* inputs,
                          VariableLocks* locks) const {
    const int data_inputs = static_cast<int>(sig_.inputs.size());
    inputs->resize(data_inputs);
    for (int i = 0; i < data_inputs; ++i) {
      if (ctx->input_dtype(i) == tensorflow::DT_RESOURCE) {
        TF_RETURN_IF_ERROR(locks->Add(ctx, i));
      } else {
        (*inputs)[i] = ctx->input(i);
      }
    }
    return locks->Lock(inputs);
  }

  // Binds the symbols and allocates every output; `outputs[i]` is its data.
  absl::Status BindAndAllocate(OpKernelContext* ctx,
                               const std::vector<Tensor>& inputs,
                               std::vector<int64_t>* symbols,
                               std::vector<void*>* outputs) const {
    // At least one element so that data() is never null for the kernel.
    symbols->assign(std::max<size_t>(sig_.binders.size(), 1), 0);
    TF_RETURN_IF_ERROR(BindSymbols(inputs, symbols));
    outputs->assign(ctx->num_outputs(), nullptr);
    for (int i = 0; i < ctx->num_outputs(); ++i) {
      TensorShape shape;
      TF_RETURN_IF_ERROR(Resolve(sig_.outputs[i], *symbols, &shape));
      Tensor* output = nullptr;
      TF_RETURN_IF_ERROR(ctx->allocate_output(i, shape, &output));
      (*outputs)[i] = output->data();
    }
    return absl::OkStatus();
  }

  // Checks every input against its encoded shape and binds each symbol to the
  // dimension named by its binder.
  absl::Status BindSymbols(const std::vector<Tensor>& inputs,
                           std::vector<int64_t>* symbols) const {
    for (size_t s = 0; s < sig_.binders.size(); ++s) {
      const Binder& b = sig_.binders[s];
      if (b.input < 0) continue;  // An index that no shape mentions.
      const TensorShape& shape = inputs[b.input].shape();
      if (shape.dims() > b.dim) (*symbols)[s] = shape.dim_size(b.dim);
    }
    for (int i = 0; i < static_cast<int>(inputs.size()); ++i) {
      const EncodedShape& expected = sig_.inputs[i];
      const TensorShape& actual = inputs[i].shape();
      bool ok = actual.dims() == static_cast<int>(expected.size());
      for (int j = 0; ok && j < actual.dims(); ++j) {
        const int64_t want = IsSymbol(expected[j])
                                 ? (*symbols)[SymbolOf(expected[j])]
                                 : expected[j];
        ok = actual.dim_size(j) == want;
      }
      if (!ok) return ShapeMismatch(i, actual, *symbols);
    }
    return absl::OkStatus();
  }

  absl::Status ShapeMismatch(int input, const TensorShape& actual,
                             const std::vector<int64_t>& symbols) const {
    const EncodedShape& expected = sig_.inputs[input];
    std::string bindings;
    for (int64_t d : expected) {
      if (!IsSymbol(d)) continue;
      const int64_t s = SymbolOf(d);
      const Binder& b = sig_.binders[s];
      if (b.input == input) continue;
      absl::StrAppend(&bindings, bindings.empty() ? " (" : ", ", "s", s, " = ",
                      symbols[s], " from input ", b.input, " dim ", b.dim);
    }
    if (!bindings.empty()) bindings += ")";
    return InvalidArgument("StitchedKernel '", sig_.kernel_name, "': input ",
                           input, " must have shape ", FormatEncoded(expected),
                           bindings, ", got ", FormatShape(actual));
  }

  // Evaluates an encoded shape with the bound symbols.
  static absl::Status Resolve(const EncodedShape& encoded,
                              const std::vector<int64_t>& symbols,
                              TensorShape* shape) {
    std::vector<int64_t> dims(encoded.size());
    for (size_t j = 0; j < encoded.size(); ++j) {
      dims[j] =
          IsSymbol(encoded[j]) ? symbols[SymbolOf(encoded[j])] : encoded[j];
    }
    return TensorShapeUtils::MakeShape(dims, shape);
  }

  absl::Status CountUnits(const std::vector<int64_t>& symbols,
                          int64_t* units) const {
    *units = 1;
    for (int64_t d : sig_.units) {
      const int64_t n = IsSymbol(d) ? symbols[SymbolOf(d)] : d;
      *units = tensorflow::MultiplyWithoutOverflow(*units, n);
      if (*units < 0) {
        return InvalidArgument("StitchedKernel '", sig_.kernel_name,
                               "': the number of work units ",
                               FormatEncoded(sig_.units), " overflows int64");
      }
    }
    return absl::OkStatus();
  }

  Signature sig_;
  std::vector<int64_t> assign_outputs_;
  std::vector<bool> validate_shapes_;
};

class StitchedKernelOp : public StitchedKernelBase {
 public:
  explicit StitchedKernelOp(OpKernelConstruction* ctx)
      : StitchedKernelBase(ctx) {
    if (!ctx->status().ok()) return;
    Embedded embedded;
    OP_REQUIRES_OK(ctx, ReadEmbedded(ctx, &embedded));
    const absl::Status status = ResolveKernel(sig_, embedded, &run_);
    if (status.ok()) return;
    OP_REQUIRES(ctx, !embedded.fallback.empty(), status);
    fallback_ = embedded.fallback[0];
    WarnOnce(status);
  }

  void Compute(OpKernelContext* ctx) override {
    ComputeOutputs(ctx);
    if (ctx->status().ok()) OP_REQUIRES_OK(ctx, AssignVariables(ctx));
  }

 private:
  void ComputeOutputs(OpKernelContext* ctx) {
    std::vector<Tensor> tensors;
    VariableLocks locks;
    OP_REQUIRES_OK(ctx, ReadInputs(ctx, &tensors, &locks));
    if (run_ == nullptr) {
      RunFallback(ctx, tensors);
      return;
    }
    std::vector<int64_t> symbols;
    std::vector<void*> outputs;
    OP_REQUIRES_OK(ctx, BindAndAllocate(ctx, tensors, &symbols, &outputs));

    std::vector<const void*> inputs(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) inputs[i] = tensors[i].data();

    int64_t error_cell[3] = {0, 0, 0};
    outputs.push_back(error_cell);

    int64_t units = 0;
    OP_REQUIRES_OK(ctx, CountUnits(symbols, &units));
    if (units == 0) return;
    units = (units + sig_.block_rows - 1) / sig_.block_rows;

    // The kernel level of tf_stitch.profile: one event per run, recorded only
    // while kernel tracing is on and a profiler traces at host level 2 or more,
    // as the executor's op events are (otherwise it costs two atomic loads).
    // Level 3 events are not recorded by TF 2.21's host tracer, measured.
    const int trace_level =
        g_kernel_tracing.load(std::memory_order_relaxed) ? 2 : kNeverTraced;
    tsl::profiler::TraceMe trace(
        [&] {
          return tsl::profiler::TraceMeEncode(
              "StitchedKernel::Run", {{"kernel", sig_.kernel_name},
                                      {"schedule", sig_.schedule},
                                      {"units", units}});
        },
        trace_level);
    const RunFn run = run_;
    const void* const* in = inputs.data();
    void* const* out = outputs.data();
    const int64_t* syms = symbols.data();
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    // SchedulingParams::Adaptive(cost) forwards to ParallelFor(units, cost, fn)
    // (whose direct use is deprecated). It returns once every shard has run,
    // so the shards may point into this frame's vectors.
    workers->ParallelFor(
        units,
        tsl::thread::ThreadPool::SchedulingParams::Adaptive(sig_.unit_cost),
        [run, in, out, syms](int64_t begin, int64_t end) {
          run(in, out, syms, begin, end);
        });
    OP_REQUIRES(ctx, __atomic_load_n(&error_cell[0], __ATOMIC_ACQUIRE) == 0,
                InvalidArgument("StitchedKernel '", sig_.kernel_name,
                                "': a gathered index, ", error_cell[1],
                                ", is not in [0, ", error_cell[2], ")"));
  }

  // One warning per kernel and process, however many times it is constructed.
  void WarnOnce(const absl::Status& why) const {
    static std::mutex* mu = new std::mutex;
    static auto* warned = new std::unordered_set<std::string>;
    std::lock_guard<std::mutex> lock(*mu);
    if (!warned->insert(absl::StrCat(sig_.kernel_name, "/", sig_.cache_key))
             .second) {
      return;
    }
    LOG(WARNING) << "tf_stitch: " << why.message()
                 << ". It runs its original TensorFlow ops instead (function "
                 << fallback_.name() << "), correct but not stitched.";
  }

  // Runs the original ops (the `fallback` function) on the op's inputs.
  void RunFallback(OpKernelContext* ctx, const std::vector<Tensor>& args) {
    tensorflow::FunctionLibraryRuntime* lib = ctx->function_library();
    OP_REQUIRES(ctx, lib != nullptr,
                FailedPrecondition("StitchedKernel '", sig_.kernel_name,
                                   "': no function library to run its "
                                   "fallback in"));
    tensorflow::FunctionLibraryRuntime::Handle handle;
    {
      std::lock_guard<std::mutex> lock(fallback_mu_);
      if (!instantiated_) {
        OP_REQUIRES_OK(ctx, lib->Instantiate(fallback_.name(),
                                             tensorflow::AttrSlice(
                                                 &fallback_.attr()),
                                             &fallback_handle_));
        instantiated_ = true;
      }
      handle = fallback_handle_;
    }
    tensorflow::FunctionLibraryRuntime::Options opts(ctx->step_id());
    opts.rendezvous = ctx->rendezvous();
    opts.cancellation_manager = ctx->cancellation_manager();
    opts.step_container = ctx->step_container();
    opts.runner = ctx->runner();
    opts.run_all_kernels_inline = true;  // never wait on our own thread pool
    std::vector<Tensor> rets;
    OP_REQUIRES_OK(ctx, lib->RunSync(std::move(opts), handle, args, &rets));
    OP_REQUIRES(ctx, static_cast<int>(rets.size()) == ctx->num_outputs(),
                FailedPrecondition("StitchedKernel '", sig_.kernel_name,
                                   "': its fallback returned ", rets.size(),
                                   " tensors for ", ctx->num_outputs(),
                                   " outputs"));
    for (int i = 0; i < ctx->num_outputs(); ++i) {
      OP_REQUIRES(ctx, rets[i].dtype() == output_type(i),
                  FailedPrecondition("StitchedKernel '", sig_.kernel_name,
                                     "': its fallback's output ", i,
                                     " has the wrong type"));
      ctx->set_output(i, rets[i]);
    }
  }

  RunFn run_ = nullptr;
  tensorflow::NameAttrList fallback_;
  std::mutex fallback_mu_;
  bool instantiated_ = false;
  tensorflow::FunctionLibraryRuntime::Handle fallback_handle_ = 0;
};

}  // namespace
}  // namespace tf_stitch

#include "stitched_kernel_gpu.h"

namespace tf_stitch {

// The inputs, outputs and attrs StitchedKernel and StitchedKernelAssign share
// (a macro: REGISTER_OP takes the chain of calls that follows it).
#define TF_STITCH_KERNEL_SIGNATURE            \
  .Input("inputs: Tin")                       \
      .Output("outputs: Tout")                \
      .Attr("Tin: list(type) >= 0")           \
      .Attr("Tout: list(type) >= 1")          \
      .Attr("kernel_name: string")            \
      .Attr("cache_key: string")              \
      .Attr("source: string")                 \
      .Attr("input_ranks: list(int)")         \
      .Attr("input_dims: list(int)")          \
      .Attr("output_ranks: list(int)")        \
      .Attr("output_dims: list(int)")         \
      .Attr("unit_dims: list(int)")           \
      .Attr("unit_cost: int")                 \
      .Attr("block_rows: int = 1")            \
      .Attr("schedule: string = ''")          \
      .Attr("cuda_key: string = ''")          \
      .Attr("cuda_launch: string = ''")       \
      .Attr("row_dims: list(int) = []")       \
      .Attr("cuda_gathers: bool = false")     \
      .Attr("binary: string = ''")            \
      .Attr("binary_target: string = ''")     \
      .Attr("cuda_binary: string = ''")       \
      .Attr("fallback: list(func) = []")      \
      .SetShapeFn(InferShapes)

REGISTER_OP("StitchedKernel")
TF_STITCH_KERNEL_SIGNATURE.Doc(R"doc(
Runs a fused kernel compiled by tf_stitch from the shared library
<cache_dir>/kernels/<cache_key[:2]>/<cache_key>.so over TensorFlow's CPU
thread pool, or (nodes labeled `_kernel: "cuda"`, on a GPU) its CUDA build
<cache_dir>/cuda/<cuda_key[:2]>/<cuda_key>.fatbin on the op's stream. Dims are
encoded as d >= 0 (static) or d < 0 (symbol -1-d).
)doc");

// Stateful: Grappler must neither prune it nor turn it into a NoOp when no op
// reads its outputs (the writes of a training step).
REGISTER_OP("StitchedKernelAssign")
TF_STITCH_KERNEL_SIGNATURE.Input("variables: N * resource")
    .Attr("N: int >= 1")
    .Attr("assign_outputs: list(int)")
    .Attr("validate_shapes: list(bool) = []")
    .SetIsStateful()
    .Doc(R"doc(
A StitchedKernel that also writes variables: once its outputs are computed,
output assign_outputs[j] becomes the value of variables[j], as an
AssignVariableOp of it would make it (under the variable's lock; a copy where
the variable is in copy-on-read mode), with validate_shapes[j] (default false)
as its validate_shape.
)doc");

#undef TF_STITCH_KERNEL_SIGNATURE

// The macro pastes its argument's first token, so `Name` must be unqualified.
using ::tensorflow::register_kernel::Name;
// Nodes with a CUDA build carry `_kernel: "cuda"`: the GPU kernel where there is
// a GPU, the CPU kernel elsewhere (stitched_kernel_gpu.h).
REGISTER_KERNEL_BUILDER(Name("StitchedKernel").Device(::tensorflow::DEVICE_CPU),
                        StitchedKernelOp);
REGISTER_KERNEL_BUILDER(
    Name("StitchedKernel").Device(::tensorflow::DEVICE_CPU).Label("cuda"),
    StitchedKernelOp);
REGISTER_KERNEL_BUILDER(
    Name("StitchedKernel").Device(::tensorflow::DEVICE_GPU).Label("cuda"),
    StitchedKernelGpuOp);
// A variable's resource handle lives in host memory, wherever its value is.
REGISTER_KERNEL_BUILDER(
    Name("StitchedKernelAssign").Device(::tensorflow::DEVICE_CPU),
    StitchedKernelOp);
REGISTER_KERNEL_BUILDER(
    Name("StitchedKernelAssign").Device(::tensorflow::DEVICE_CPU).Label("cuda"),
    StitchedKernelOp);
REGISTER_KERNEL_BUILDER(Name("StitchedKernelAssign")
                            .Device(::tensorflow::DEVICE_GPU)
                            .Label("cuda")
                            .HostMemory("variables"),
                        StitchedKernelGpuOp);

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
