// tf_stitch/runtime/op/kernel_cpu.cc
//
// The CPU kernel of StitchedKernel: it finds the kernel's library
// (kernel_library.h) when constructed, and at each run splits the work units
// over TensorFlow's intra-op CPU thread pool, each shard calling ts_run once.
// A node whose library cannot be found runs its `fallback` function (its
// original TensorFlow ops) instead, with one warning per kernel, where it has
// one; otherwise construction fails with every reason.

#include <cstdint>
#include <mutex>  // NOLINT(build/c++11)
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kernel_base.h"
#include "kernel_library.h"
#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/platform/logging.h"
#include "tsl/profiler/lib/traceme.h"
#include "tsl/profiler/lib/traceme_encode.h"

namespace tf_stitch {
namespace {

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

// The macro pastes its argument's first token, so `Name` must be unqualified.
using ::tensorflow::register_kernel::Name;
// Nodes with a CUDA build carry `_kernel: "cuda"`: the GPU kernel where there is
// a GPU (kernel_gpu.cc), this one elsewhere.
REGISTER_KERNEL_BUILDER(Name("StitchedKernel").Device(::tensorflow::DEVICE_CPU),
                        StitchedKernelOp);
REGISTER_KERNEL_BUILDER(
    Name("StitchedKernel").Device(::tensorflow::DEVICE_CPU).Label("cuda"),
    StitchedKernelOp);
REGISTER_KERNEL_BUILDER(
    Name("StitchedKernelAssign").Device(::tensorflow::DEVICE_CPU),
    StitchedKernelOp);
REGISTER_KERNEL_BUILDER(
    Name("StitchedKernelAssign").Device(::tensorflow::DEVICE_CPU).Label("cuda"),
    StitchedKernelOp);

}  // namespace tf_stitch
