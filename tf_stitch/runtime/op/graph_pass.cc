// tf_stitch's hook inside TensorFlow's graph optimization: a
// GraphOptimizationPass (PRE_PLACEMENT, before functional ops are lowered)
// that hands each function graph TensorFlow instantiates -- every
// tf.function, Keras predict/fit step and loaded SavedModel signature -- to
// the rewriter tf_stitch registers (tf_stitch.enable(), ctypes), and puts the
// graph it returns in the original's place.
//
// The pass does nothing until a rewriter is registered, and nothing for
// graphs that are not functions (a TF1 Session's graph: its fetches are not
// known here). The rewriter gets the graph as a deterministic GraphDef (the
// functions it calls in its library) and the names of the function's control
// outputs; it answers 0 (leave the graph), 1 (the new GraphDef is in `out`)
// or -1 (it failed: the reason is in `out`, the graph is left as it was).
// A graph the pass cannot convert back is left as it was, with a warning.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "tensorflow/core/common_runtime/graph_constructor.h"
#include "tensorflow/core/common_runtime/optimization_registry.h"
#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/framework/graph.pb.h"
#include "tensorflow/core/graph/graph.h"
#include "tensorflow/core/lib/strings/proto_serialization.h"
#include "tensorflow/core/platform/logging.h"

namespace tf_stitch {

// (graph, its size, the function's name, its control outputs joined by '\n',
// out) -> 0 | 1 | -1.
using RewriteFn = int (*)(const char*, int64_t, const char*, const char*,
                          std::string*);

namespace {

std::atomic<RewriteFn> g_rewrite{nullptr};

// Adds the functions of `library` that `flib` lacks; false (and `error`) if
// one of them has another body there under the same name.
bool AddFunctions(const tensorflow::FunctionDefLibrary& library,
                  tensorflow::FunctionLibraryDefinition* flib,
                  std::string* error) {
  for (const tensorflow::FunctionDef& fdef : library.function()) {
    const std::string& name = fdef.signature().name();
    const tensorflow::FunctionDef* have = flib->Find(name);
    if (have != nullptr) {
      std::string a, b;
      tensorflow::SerializeToStringDeterministic(*have, &a);
      tensorflow::SerializeToStringDeterministic(fdef, &b);
      if (a != b) {
        *error = "function " + name + " already has another body";
        return false;
      }
      continue;
    }
    tensorflow::Status added = flib->AddFunctionDef(fdef);
    if (!added.ok()) {
      *error = std::string(added.message());
      return false;
    }
  }
  return true;
}

// A function XLA compiles (jit_compile=True): no XLA kernel runs
// StitchedKernel, so its graph stays TensorFlow's.
bool MustCompile(const tensorflow::FunctionDef& function) {
  auto found = function.attr().find("_XlaMustCompile");
  return found != function.attr().end() && found->second.b();
}

class StitchPass : public tensorflow::GraphOptimizationPass {
 public:
  tensorflow::Status Run(
      const tensorflow::GraphOptimizationPassOptions& options) override {
    RewriteFn rewrite = g_rewrite.load();
    if (rewrite == nullptr || options.graph == nullptr ||
        *options.graph == nullptr || !options.is_function_graph ||
        options.function_def == nullptr || MustCompile(*options.function_def)) {
      return tensorflow::OkStatus();
    }
    const tensorflow::FunctionDef& function = *options.function_def;
    std::vector<std::string> control_rets;
    for (const auto& ret : function.control_ret()) {
      control_rets.push_back(ret.second);
    }
    tensorflow::Graph* graph = options.graph->get();
    tensorflow::GraphDef graph_def;
    graph->ToGraphDef(&graph_def);
    // Only the functions the graph calls travel with it.
    *graph_def.mutable_library() =
        graph->flib_def().ReachableDefinitions(graph_def).ToProto();
    std::string data;
    if (!tensorflow::SerializeToStringDeterministic(graph_def, &data)) {
      return tensorflow::OkStatus();
    }
    const std::string joined = absl::StrJoin(control_rets, "\n");
    std::string out;
    const int answer = rewrite(data.data(), static_cast<int64_t>(data.size()),
                               function.signature().name().c_str(),
                               joined.c_str(), &out);
    if (answer != 1) {
      if (answer < 0) {
        LOG(WARNING) << "tf_stitch left a graph unoptimized: " << out;
      }
      return tensorflow::OkStatus();
    }
    std::string error;
    if (!Replace(out, options, control_rets, &error)) {
      LOG(WARNING) << "tf_stitch left a graph unoptimized: " << error;
    }
    return tensorflow::OkStatus();
  }

 private:
  // Puts the graph serialized in `data` in place of `options.graph`; false
  // (and `error`, the graph untouched) if it cannot.
  static bool Replace(const std::string& data,
                      const tensorflow::GraphOptimizationPassOptions& options,
                      const std::vector<std::string>& control_rets,
                      std::string* error) {
    tensorflow::GraphDef optimized;
    if (!optimized.ParseFromString(data)) {
      *error = "the rewriter returned no GraphDef";
      return false;
    }
    tensorflow::Graph* graph = options.graph->get();
    auto replacement =
        std::make_unique<tensorflow::Graph>(graph->flib_def());
    tensorflow::GraphConstructorOptions construct;
    construct.allow_internal_ops = true;
    construct.add_default_attributes = true;
    tensorflow::GraphDef body = optimized;
    body.clear_library();
    if (!AddFunctions(optimized.library(), replacement->mutable_flib_def(),
                      error)) {
      return false;
    }
    tensorflow::Status made =
        tensorflow::ConvertGraphDefToGraph(construct, body, replacement.get());
    if (!made.ok()) {
      *error = std::string(made.message());
      return false;
    }
    std::unordered_set<std::string> names;
    for (const tensorflow::Node* node : replacement->op_nodes()) {
      names.insert(node->name());
    }
    for (const std::string& name : control_rets) {
      if (names.count(name) == 0) {
        *error = "the control output " + name + " is gone";
        return false;
      }
    }
    if (options.flib_def != nullptr &&
        !AddFunctions(optimized.library(), options.flib_def, error)) {
      return false;
    }
    options.graph->reset(replacement.release());
    return true;
  }
};

// Before LowerFunctionalOpsPass (priority 10): loops and conditionals are
// still While and If, as tf_stitch's own frontends see them.
REGISTER_OPTIMIZATION(tensorflow::OptimizationPassRegistry::PRE_PLACEMENT, 20,
                      StitchPass);

}  // namespace
}  // namespace tf_stitch

// tf_stitch.hook registers (or, with nullptr, removes) the rewriter (ctypes).
extern "C" __attribute__((visibility("default"))) void
tf_stitch_set_graph_rewriter(tf_stitch::RewriteFn rewrite) {
  tf_stitch::g_rewrite.store(rewrite);
}

// The rewriter's answer, written into the pass's string (ctypes).
extern "C" __attribute__((visibility("default"))) void
tf_stitch_set_string(std::string* out, const char* data, int64_t size) {
  out->assign(data, static_cast<size_t>(size));
}
