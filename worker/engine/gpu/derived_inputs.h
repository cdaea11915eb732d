// Derived inputs (TensorSpec::derived, docs/task-authoring.md): inputs of a task that the harness
// computes with its baseline library from the inputs it drew, after drawing them and before the
// candidate or the reference runs. The backward attention tasks take O and LSE from the cuDNN
// forward pass this way, so a kernel is given a consistent forward state.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_DERIVED_INPUTS_H_
#define PTXBENCH_WORKER_ENGINE_GPU_DERIVED_INPUTS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/engine/gpu/baseline.h"
#include "worker/engine/gpu/runtime.h"

namespace ptxbench::gpu {

struct WorkloadTensor;

// The library runs that fill the derived inputs of one workload's tensor set.
class DerivedInputs {
 public:
  // `tensors` as ResolveTensors gives them; `axes` the workload's. Empty (nothing to run) when no
  // tensor is derived. Building a step creates the library's plan (cached per shape).
  static absl::StatusOr<DerivedInputs> Create(const std::vector<WorkloadTensor>& tensors,
                                              const std::map<std::string, int64_t>& axes);
  DerivedInputs() = default;
  DerivedInputs(DerivedInputs&&) = default;
  DerivedInputs& operator=(DerivedInputs&&) = default;

  bool empty() const { return steps_.empty(); }
  // Runs every step on `buffers` (indexed like `tensors`), asynchronously on `stream`. The
  // libraries used are deterministic for a given device and shape, so every process that draws
  // the same seed computes the same bits.
  absl::Status Fill(const std::vector<DeviceBuffer>& buffers, cudaStream_t stream);

 private:
  struct Step {
    std::unique_ptr<Baseline> operation;
    std::vector<int> inputs;   // Tensor indices, in the operation's input order.
    std::vector<int> outputs;  // Tensor indices, or -1 for an output no tensor receives...
    std::vector<DeviceBuffer> discarded;  // ...which then goes to one of these.
  };
  std::vector<Step> steps_;
};

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_DERIVED_INPUTS_H_
