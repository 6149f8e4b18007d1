// tf_stitch/runtime/op/kernel_files.h
//
// Files of the kernel cache as tf_stitch's Python side lays them out
// (tf_stitch/runtime/cache.py, integrity.py, leftovers.py): where a kernel
// lives, the sha256 recorded beside it, and writing a file so that readers see
// no file or the whole file.

#ifndef TF_STITCH_RUNTIME_OP_KERNEL_FILES_H_
#define TF_STITCH_RUNTIME_OP_KERNEL_FILES_H_

#include <string>

#include "absl/status/status.h"

namespace tf_stitch {

// $TF_STITCH_CACHE_DIR, else $XDG_CACHE_HOME/tf_stitch, else
// ~/.cache/tf_stitch, as tf_stitch.runtime.cache.cache_dir() has it.
std::string CacheDir();

// <cache_dir>/kernels/<key[:2]>/<key>.so
std::string KernelPath(const std::string& key);

// Where tf_stitch.runtime.integrity records a cached library's sha256.
std::string DigestPath(const std::string& library);

// Whether the library at `path` matches the digest recorded beside it.
absl::Status CheckDigest(const std::string& path);

// Creates `dir` and its parents.
absl::Status MakeDirs(const std::string& dir);

// `pid<PID>@<host>`: the writer in the name of every temporary file.
std::string OwnerTag();

// Writes `data` to a new file `<prefix>XXXXXX<suffix>` (flushed to disk) and
// sets `path` to its name.
absl::Status WriteTemp(const std::string& prefix, const std::string& suffix,
                       const std::string& data, std::string* path);

// Writes `data` to `path` through a temporary file and an atomic rename.
absl::Status WriteAtomically(const std::string& path, const std::string& data);

}  // namespace tf_stitch

#endif  // TF_STITCH_RUNTIME_OP_KERNEL_FILES_H_
