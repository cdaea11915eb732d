#include "worker/engine/gpu/derived_inputs.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/expr.h"
#include "common/status.h"
#include "common/task.h"
#include "worker/engine/gpu/plan_runner.h"

namespace ptxbench::gpu {

absl::StatusOr<DerivedInputs> DerivedInputs::Create(const std::vector<WorkloadTensor>& tensors,
                                                    const std::map<std::string, int64_t>& axes) {
  DerivedInputs derived;
  std::map<std::string, size_t> step_of;  // "library/operation" -> index into steps_.
  auto index_of = [&](const std::string& name) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].name == name) return static_cast<int>(i);
    }
    return -1;
  };
  for (const WorkloadTensor& t : tensors) {
    if (t.derived_operation.empty()) continue;
    const OperationSignature* op = FindDerivableOperation(t.derived_library, t.derived_operation);
    if (op == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name, ": ", t.derived_library,
                                                     "/", t.derived_operation,
                                                     " cannot derive an input"));
    }
    const std::string key = absl::StrCat(op->library, "/", op->operation);
    if (step_of.count(key) > 0) continue;
    Step step;
    ASSIGN_OR_RETURN(step.operation, CreateBaseline(op->library, op->operation, axes));
    for (const OperationSignature::Tensor& in : op->inputs) {
      const int index = index_of(in.name);
      if (index < 0 || tensors[index].output || !tensors[index].derived_operation.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(op->operation, " reads ", in.name, ", not a drawn input of the task"));
      }
      step.inputs.push_back(index);
    }
    for (const OperationSignature::Tensor& out : op->outputs) {
      int index = index_of(out.name);
      if (index >= 0 && (tensors[index].derived_operation != op->operation ||
                         tensors[index].derived_output != out.name)) {
        index = -1;  // A tensor of that name that is not this output's destination.
      }
      step.outputs.push_back(index);
      if (index < 0) {
        int64_t elements = 1;
        for (const std::string& dim : out.shape) {
          ASSIGN_OR_RETURN(int64_t extent, EvalIntExpr(dim, axes));
          elements *= extent;
        }
        ASSIGN_OR_RETURN(DeviceBuffer b,
                         DeviceBuffer::Allocate(static_cast<size_t>(elements) *
                                                static_cast<size_t>(DTypeBytes(out.dtype))));
        step.discarded.push_back(std::move(b));
      }
    }
    step_of[key] = derived.steps_.size();
    derived.steps_.push_back(std::move(step));
  }
  return derived;
}

absl::Status DerivedInputs::Fill(const std::vector<DeviceBuffer>& buffers, cudaStream_t stream) {
  for (Step& step : steps_) {
    std::vector<const void*> inputs;
    std::vector<void*> outputs;
    for (int i : step.inputs) inputs.push_back(buffers[i].get());
    size_t discarded = 0;
    for (int i : step.outputs) {
      outputs.push_back(i >= 0 ? buffers[i].get() : step.discarded[discarded++].get());
    }
    RETURN_IF_ERROR(step.operation->Run(inputs, outputs, stream));
  }
  return absl::OkStatus();
}

}  // namespace ptxbench::gpu
