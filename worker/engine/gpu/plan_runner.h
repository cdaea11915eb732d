// Turns a resolved launch plan (worker/engine/plan.h) into device buffers, encoded tensor maps
// and cuLaunchKernelEx calls on one stream.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_PLAN_RUNNER_H_
#define PTXBENCH_WORKER_ENGINE_GPU_PLAN_RUNNER_H_

#include <cuda.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/task.h"
#include "worker/engine/gpu/derived_inputs.h"
#include "worker/engine/gpu/runtime.h"
#include "worker/engine/plan.h"

namespace ptxbench::gpu {

BuiltinDType ToBuiltinDType(DType dtype);

struct WorkloadTensor {
  int task_index = 0;
  std::string name;
  bool output = false;
  BuiltinDType dtype = BuiltinDType::kBF16;
  int distribution = 0;              // philox.h kDistNormal / kDistSpiky / kDistBlockScale / ...
  IndexDistributionArgs index_args;  // The integer distributions' parameters, evaluated.
  std::vector<int64_t> shape;        // Row-major, outermost first.
  uint64_t elements = 0;
  uint64_t bytes = 0;
  // A derived input (TensorSpec::derived): output `derived_output` of the baseline library's
  // `derived_operation`, computed on the workload's axes instead of drawn.
  std::string derived_library;
  std::string derived_operation;
  std::string derived_output;
  std::map<std::string, int64_t> axes;  // The workload's, for the derivation.
};

// The task's tensors with their shapes evaluated for one workload.
absl::StatusOr<std::vector<WorkloadTensor>> ResolveTensors(const Task& task,
                                                           const Workload& workload);

// Device buffers for every task tensor of one workload.
class TensorSet {
 public:
  static absl::StatusOr<TensorSet> Allocate(std::vector<WorkloadTensor> tensors);
  TensorSet() = default;
  TensorSet(TensorSet&&) = default;
  TensorSet& operator=(TensorSet&&) = default;

  // Inputs from (seed, tensor index): the same bits in every process. Derived inputs are then
  // computed from the drawn ones (derived_inputs.h).
  absl::Status GenerateInputs(Builtins& builtins, uint64_t seed, cudaStream_t stream);
  // Outputs overwritten with the dtype's NaN poison.
  absl::Status PoisonOutputs(Builtins& builtins, cudaStream_t stream);
  // Combined keyed hash of every input buffer (synchronizes the stream).
  absl::StatusOr<uint64_t> HashInputs(Builtins& builtins, uint64_t key, cudaStream_t stream);
  // Copies output `output_ordinal` (0 = first output tensor) into pageable host memory: never
  // into pinned or mapped memory, which kernels could reach.
  absl::StatusOr<std::string> DownloadOutput(size_t output_ordinal, cudaStream_t stream) const;
  // The same, without running any kernel (host generation, copies only): for a process where
  // the submission's kernel must be the first kernel to execute (evaluator.cc, instrument
  // fallback). Values match GenerateInputs to within a rounding step, not bit for bit; derived
  // inputs are drawn like the others here (running the library would be a kernel before the
  // submission's).
  absl::Status UploadInputsFromHost(uint64_t seed, cudaStream_t stream);
  absl::Status PoisonOutputsByCopy(cudaStream_t stream);
  // Zeroes every buffer (the baseline's outputs are cleared before they are freed).
  absl::Status ZeroAll(cudaStream_t stream);

  std::vector<const void*> InputPointers() const;
  std::vector<void*> OutputPointers() const;
  const std::vector<WorkloadTensor>& tensors() const { return tensors_; }
  std::vector<size_t> OutputTaskIndices() const;
  void* pointer(int task_index) const { return buffers_[task_index].get(); }

 private:
  std::vector<WorkloadTensor> tensors_;
  std::vector<DeviceBuffer> buffers_;
  DerivedInputs derived_;
};

// One plan bound to one TensorSet: scratch buffers, tensor maps and argument slots are built
// once; Bind() (re)resolves kernels after every module (re)load.
class PlanLauncher {
 public:
  // InvalidArgument for what the plan asks that the driver refuses (a tensor map that does not
  // encode): PLAN_INVALID.
  static absl::StatusOr<PlanLauncher> Create(const ResolvedPlan& plan, const TensorSet& tensors);
  PlanLauncher() = default;
  PlanLauncher(PlanLauncher&&) = default;
  PlanLauncher& operator=(PlanLauncher&&) = default;

  absl::Status Bind(const Module& module);
  absl::Status ZeroScratch(cudaStream_t stream);
  absl::Status ZeroScratchByCopy(cudaStream_t stream);
  // Launches [begin, end) of the plan, asynchronously on `stream`. A refused launch
  // (bad configuration) is FailedPrecondition; a fault surfaces at the next synchronize.
  absl::Status Launch(cudaStream_t stream, size_t begin, size_t end);
  absl::Status LaunchAll(cudaStream_t stream) { return Launch(stream, 0, launches_.size()); }
  size_t launch_count() const { return launches_.size(); }
  const std::string& kernel(size_t i) const { return launches_[i].kernel; }

 private:
  struct alignas(64) ArgSlot {
    unsigned char bytes[128];
  };
  struct Prepared {
    std::string kernel;
    CUfunction function = nullptr;
    unsigned grid[3];
    unsigned block[3];
    unsigned cluster[3];
    bool has_cluster = false;
    unsigned dynamic_shared_bytes = 0;
    std::vector<ArgSlot> slots;
    std::vector<void*> params;
  };
  std::vector<Prepared> launches_;
  std::vector<DeviceBuffer> scratch_;
};

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_PLAN_RUNNER_H_
