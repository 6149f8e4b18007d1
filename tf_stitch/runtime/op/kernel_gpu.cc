// tf_stitch/runtime/op/kernel_gpu.cc
//
// The GPU kernel of StitchedKernel. It launches the kernel's CUDA build, a fatbin at
// <cache_dir>/cuda/<cuda_key[:2]>/<cuda_key>.fatbin (tf_stitch.runtime.cuda_compiler), on the
// op's CUDA stream through the driver API (cuda_driver.h), with TensorFlow allocating the
// outputs (or from the fatbin the node carries, `cuda_binary`, when the cache lacks it). The
// module is loaded once per CUDA context and kernel. Nodes carry `_kernel: "cuda"`
// to select it (the CPU kernel is registered under that label too, so such nodes still run
// where there is no GPU); unlabeled nodes keep running on the CPU.
//
// Kernel arguments, in order (codegen/cuda.py, kernel_arguments): input pointers, output
// pointers, for kernels that gather (`cuda_gathers`) an int64[3] error cell, the bound symbols
// (int64), the first unit (0) and the number of units. A gathered index out of range fails
// the op with InvalidArgument, as GatherV2 does (the op then waits for its kernel). The grid is
// a block per unit (`cuda_launch: "blocks"`) or a thread per element ("elements"; the elements
// of a unit are the product of `row_dims`), capped: the kernels stride over the rest.

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cuda_driver.h"
#include "kernel_base.h"
#include "kernel_files.h"
#include "tensorflow/core/framework/device_base.h"
#include "xla/stream_executor/stream.h"

namespace tf_stitch {
namespace {

// Threads per block; codegen/cuda.py's BLOCK_THREADS (__launch_bounds__) must agree.
constexpr int64_t kCudaBlockThreads = 256;
constexpr int64_t kMaxGridBlocks = int64_t{1} << 20;

std::string FatbinPath(const std::string& key) {
  return absl::StrCat(CacheDir(), "/cuda/", key.substr(0, 2), "/", key,
                      ".fatbin");
}

class StitchedKernelGpuOp : public StitchedKernelBase {
 public:
  explicit StitchedKernelGpuOp(OpKernelConstruction* ctx)
      : StitchedKernelBase(ctx) {
    if (!ctx->status().ok()) return;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("cuda_key", &cuda_key_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("cuda_launch", &launch_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("row_dims", &row_dims_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("cuda_gathers", &gathers_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("cuda_binary", &carried_));
    OP_REQUIRES(ctx,
                cuda_key_.size() == kCacheKeyLength && IsLowerHex(cuda_key_),
                FailedPrecondition("StitchedKernel '", sig_.kernel_name,
                                   "' has no CUDA build (cuda_key '", cuda_key_,
                                   "'); optimize with cuda=True where nvcc is"));
    OP_REQUIRES(ctx, launch_ == "blocks" || launch_ == "elements",
                InvalidArgument("StitchedKernel '", sig_.kernel_name,
                                "': cuda_launch must be 'blocks' or "
                                "'elements', got '", launch_, "'"));
  }

  void Compute(OpKernelContext* ctx) override {
    ComputeOutputs(ctx);
    if (ctx->status().ok()) OP_REQUIRES_OK(ctx, AssignVariables(ctx));
  }

 protected:
  // On the op's stream, ordered after the kernel that computed `from`.
  absl::Status CopyTensor(OpKernelContext* ctx, const Tensor& from,
                          Tensor* to) override {
    const uint64_t bytes = from.TotalBytes();
    if (bytes == 0) return absl::OkStatus();
    auto* device_context = ctx->op_device_context();
    if (device_context == nullptr || device_context->stream() == nullptr) {
      return Failed("the op has no GPU stream");
    }
    stream_executor::DeviceAddressBase src(const_cast<void*>(from.data()),
                                           bytes);
    stream_executor::DeviceAddressBase dst(to->data(), bytes);
    return device_context->stream()->MemcpyD2D(&dst, src, bytes);
  }

 private:
  void ComputeOutputs(OpKernelContext* ctx) {
    using namespace cuda_driver;  // NOLINT(build/namespaces)
    std::vector<Tensor> tensors;
    VariableLocks locks;
    OP_REQUIRES_OK(ctx, ReadInputs(ctx, &tensors, &locks));
    std::vector<int64_t> symbols;
    std::vector<void*> outputs;
    OP_REQUIRES_OK(ctx, BindAndAllocate(ctx, tensors, &symbols, &outputs));
    int64_t units = 0;
    OP_REQUIRES_OK(ctx, CountUnits(symbols, &units));
    if (units == 0) return;
    int64_t row = 1;
    for (int64_t d : row_dims_) {
      row = tensorflow::MultiplyWithoutOverflow(
          row, IsSymbol(d) ? symbols[SymbolOf(d)] : d);
    }
    const int64_t work = launch_ == "blocks"
                             ? units
                             : tensorflow::MultiplyWithoutOverflow(units, row);
    OP_REQUIRES(ctx, row >= 0 && work >= 0,
                InvalidArgument("StitchedKernel '", sig_.kernel_name,
                                "': the launch size overflows int64"));
    if (work == 0) return;

    const Api& api = Driver();
    OP_REQUIRES(ctx, api.error.empty(), Failed(api.error));
    auto* device_context = ctx->op_device_context();
    OP_REQUIRES(ctx, device_context != nullptr && device_context->stream(),
                Failed("the op has no GPU stream"));
    auto stream = static_cast<CUstream>(
        device_context->stream()->platform_specific_handle().stream);
    CUcontext context = nullptr;
    OP_REQUIRES_OK(ctx, Check(api.cuStreamGetCtx(stream, &context),
                              "cuStreamGetCtx"));
    OP_REQUIRES_OK(ctx, Check(api.cuCtxPushCurrent(context), "cuCtxPushCurrent"));
    absl::Status status = Launch(ctx, api, context, stream, tensors, symbols,
                                 outputs, units, work);
    CUcontext popped = nullptr;
    api.cuCtxPopCurrent(&popped);
    OP_REQUIRES_OK(ctx, status);
  }

 private:
  absl::Status Launch(OpKernelContext* ctx, const cuda_driver::Api& api,
                      cuda_driver::CUcontext context,
                      cuda_driver::CUstream stream,
                      const std::vector<Tensor>& inputs,
                      const std::vector<int64_t>& symbols,
                      const std::vector<void*>& outputs, int64_t units,
                      int64_t work) {
    cuda_driver::CUfunction function = nullptr;
    TF_RETURN_IF_ERROR(FunctionFor(api, context, &function));
    std::vector<void*> pointers;
    for (const Tensor& input : inputs) {
      pointers.push_back(const_cast<void*>(input.data()));
    }
    pointers.insert(pointers.end(), outputs.begin(), outputs.end());
    Tensor cell;  // int64[3] {0, 0, 0}: a gathered index out of range
    if (gathers_) {
      TF_RETURN_IF_ERROR(ctx->allocate_temp(tensorflow::DT_INT64,
                                            TensorShape({3}), &cell));
      pointers.push_back(cell.data());
      TF_RETURN_IF_ERROR(Check(
          api.cuMemsetD32Async(
              reinterpret_cast<cuda_driver::CUdeviceptr>(cell.data()), 0, 6,
              stream),
          "cuMemsetD32Async"));
    }
    std::vector<int64_t> scalars(symbols.begin(),
                                 symbols.begin() + sig_.binders.size());
    scalars.push_back(0);  // the first unit
    scalars.push_back(units);
    std::vector<void*> params;
    for (void*& p : pointers) params.push_back(&p);
    for (int64_t& s : scalars) params.push_back(&s);
    const int64_t blocks =
        launch_ == "blocks"
            ? std::min(work, kMaxGridBlocks)
            : std::min((work + kCudaBlockThreads - 1) / kCudaBlockThreads,
                       kMaxGridBlocks);
    TF_RETURN_IF_ERROR(
        Check(api.cuLaunchKernel(function, static_cast<unsigned>(blocks), 1, 1,
                                 kCudaBlockThreads, 1, 1, 0, stream,
                                 params.data(), nullptr),
              "cuLaunchKernel"));
    if (!gathers_) return absl::OkStatus();
    // The index check waits for the kernel: only kernels that gather pay it.
    int64_t host[3] = {0, 0, 0};
    TF_RETURN_IF_ERROR(Check(
        api.cuMemcpyDtoHAsync(
            host, reinterpret_cast<cuda_driver::CUdeviceptr>(cell.data()),
            sizeof host, stream),
        "cuMemcpyDtoHAsync"));
    TF_RETURN_IF_ERROR(
        Check(api.cuStreamSynchronize(stream), "cuStreamSynchronize"));
    if (host[0] != 0) {
      return InvalidArgument("StitchedKernel '", sig_.kernel_name,
                             "': a gathered index, ", host[1],
                             ", is not in [0, ", host[2], ")");
    }
    return absl::OkStatus();
  }

  // The kernel's function in `context`, loading its fatbin on first use.
  absl::Status FunctionFor(const cuda_driver::Api& api,
                           cuda_driver::CUcontext context,
                           cuda_driver::CUfunction* function) {
    static std::mutex mutex;
    static auto* loaded =
        new std::map<std::pair<cuda_driver::CUcontext, std::string>,
                     cuda_driver::CUfunction>();
    std::lock_guard<std::mutex> lock(mutex);
    const auto key = std::make_pair(context, cuda_key_);
    if (auto it = loaded->find(key); it != loaded->end()) {
      *function = it->second;
      return absl::OkStatus();
    }
    // The fatbin in the cache, else the one the node carries (a converted
    // SavedModel's nodes carry theirs: fatbins are not tied to one machine).
    const std::string path = FatbinPath(cuda_key_);
    std::ifstream file(path, std::ios::binary);
    std::string bytes = carried_;
    if (file) {
      std::stringstream image;
      image << file.rdbuf();
      bytes = image.str();
    } else if (bytes.empty()) {
      return Failed(absl::StrCat("its CUDA build ", path,
                                 " is missing; optimize again where nvcc is"));
    }
    cuda_driver::CUmodule module = nullptr;
    TF_RETURN_IF_ERROR(
        Check(api.cuModuleLoadData(&module, bytes.data()), "cuModuleLoadData"));
    TF_RETURN_IF_ERROR(
        Check(api.cuModuleGetFunction(function, module, sig_.kernel_name.c_str()),
              "cuModuleGetFunction"));
    (*loaded)[key] = *function;
    return absl::OkStatus();
  }

  absl::Status Check(cuda_driver::CUresult result, const char* call) const {
    if (result == cuda_driver::CUDA_SUCCESS) return absl::OkStatus();
    return Failed(
        absl::StrCat(call, " failed: ", cuda_driver::ErrorString(result)));
  }

  absl::Status Failed(const std::string& why) const {
    return absl::InternalError(absl::StrCat(
        "StitchedKernel '", sig_.kernel_name, "' (GPU): ", why));
  }

  std::string cuda_key_;
  std::string launch_;
  std::vector<int64_t> row_dims_;
  bool gathers_ = false;
  std::string carried_;  // the `cuda_binary` attr
};

}  // namespace

using ::tensorflow::register_kernel::Name;
REGISTER_KERNEL_BUILDER(
    Name("StitchedKernel").Device(::tensorflow::DEVICE_GPU).Label("cuda"),
    StitchedKernelGpuOp);
// A variable's resource handle lives in host memory, wherever its value is.
REGISTER_KERNEL_BUILDER(Name("StitchedKernelAssign")
                            .Device(::tensorflow::DEVICE_GPU)
                            .Label("cuda")
                            .HostMemory("variables"),
                        StitchedKernelGpuOp);

}  // namespace tf_stitch
