// tf_stitch/runtime/op/kernel_base.h
//
// What the CPU kernel (kernel_cpu.cc) and the GPU kernel (kernel_gpu.cc) of
// StitchedKernel share: the validated signature, the inputs read (a live
// variable's tensor in place, under its lock), the symbols bound from them,
// the outputs allocated, the number of work units, and StitchedKernelAssign's
// writes of its variables.

#ifndef TF_STITCH_RUNTIME_OP_KERNEL_BASE_H_
#define TF_STITCH_RUNTIME_OP_KERNEL_BASE_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "common.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/util/overflow.h"

namespace tf_stitch {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::TensorShapeUtils;

inline std::string FormatShape(const TensorShape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape.dim_sizes(), ", "), "]");
}

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

}  // namespace tf_stitch

#endif  // TF_STITCH_RUNTIME_OP_KERNEL_BASE_H_
