// tf_stitch/runtime/op/kernel_files.cc (see kernel_files.h)

#include "kernel_files.h"

#include <errno.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common.h"
#include "sha256.h"

namespace tf_stitch {

// tf_stitch.runtime.cache.cache_dir()'s rule: $TF_STITCH_CACHE_DIR, else
// $XDG_CACHE_HOME/tf_stitch, else ~/.cache/tf_stitch, empty variables counting
// as unset (tests/runtime/test_op_rules.py compares the two, c_api.cc).
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

}  // namespace tf_stitch
