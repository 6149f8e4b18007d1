// tf_stitch/runtime/op/cuda_driver.h
//
// The few CUDA driver API calls the GPU kernel of StitchedKernel makes, resolved lazily from
// libcuda.so.1 with dlopen: the op library never links the driver, so it loads (and its CPU
// kernel runs) on machines without one. Types are declared here with the driver's ABI, so no
// CUDA header is needed to build it.

#ifndef TF_STITCH_RUNTIME_CUDA_DRIVER_H_
#define TF_STITCH_RUNTIME_CUDA_DRIVER_H_

#include <dlfcn.h>

#include <cstddef>
#include <mutex>  // NOLINT(build/c++11)
#include <string>

namespace tf_stitch {
namespace cuda_driver {

using CUresult = int;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUdeviceptr = unsigned long long;  // NOLINT(runtime/int): the driver's type
constexpr CUresult CUDA_SUCCESS = 0;

struct Api {
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*cuStreamGetCtx)(CUstream, CUcontext*) = nullptr;
  CUresult (*cuCtxPushCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxPopCurrent)(CUcontext*) = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, CUstream, void**,
                             void**) = nullptr;
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream) = nullptr;
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  std::string error;  // why the driver is unusable; empty when it is
};

template <typename Fn>
bool Resolve(void* lib, const char* name, Fn* fn, std::string* error) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*fn == nullptr && error->empty()) {
    *error = std::string("libcuda.so.1 has no ") + name;
  }
  return *fn != nullptr;
}

// The driver API, loaded once per process.
inline const Api& Driver() {
  static Api api;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      api.error = std::string("cannot load the CUDA driver (libcuda.so.1): ") +
                  (why ? why : "unknown error");
      return;
    }
    std::string& e = api.error;
    Resolve(lib, "cuGetErrorString", &api.cuGetErrorString, &e);
    Resolve(lib, "cuStreamGetCtx", &api.cuStreamGetCtx, &e);
    Resolve(lib, "cuCtxPushCurrent_v2", &api.cuCtxPushCurrent, &e);
    Resolve(lib, "cuCtxPopCurrent_v2", &api.cuCtxPopCurrent, &e);
    Resolve(lib, "cuModuleLoadData", &api.cuModuleLoadData, &e);
    Resolve(lib, "cuModuleGetFunction", &api.cuModuleGetFunction, &e);
    Resolve(lib, "cuLaunchKernel", &api.cuLaunchKernel, &e);
    Resolve(lib, "cuMemsetD32Async", &api.cuMemsetD32Async, &e);
    Resolve(lib, "cuMemcpyDtoHAsync_v2", &api.cuMemcpyDtoHAsync, &e);
    Resolve(lib, "cuStreamSynchronize", &api.cuStreamSynchronize, &e);
  });
  return api;
}

inline std::string ErrorString(CUresult result) {
  const char* text = nullptr;
  const Api& api = Driver();
  if (api.cuGetErrorString != nullptr) api.cuGetErrorString(result, &text);
  return std::string(text != nullptr ? text : "unknown CUDA error") + " (" +
         std::to_string(result) + ")";
}

}  // namespace cuda_driver
}  // namespace tf_stitch

#endif  // TF_STITCH_RUNTIME_CUDA_DRIVER_H_
