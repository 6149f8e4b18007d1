// tf_stitch/runtime/op/kernel_library.cc (see kernel_library.h)

#include "kernel_library.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>  // NOLINT(build/c++11)
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "kernel_files.h"
#include "sha256.h"

namespace tf_stitch {
namespace {

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

}  // namespace

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

std::string CpuSignature() {
  const auto cpu = ThisCpu();
  return absl::StrCat(cpu.first, "\n", absl::StrJoin(cpu.second, " "));
}

}  // namespace tf_stitch
