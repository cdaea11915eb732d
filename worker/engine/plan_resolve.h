// The units of plan resolution, internal to worker/engine/plan*.cc: each resolves one part of a
// structurally valid plan (common/launch_plan.h) for one workload and names the field it
// refuses. ValidatePlan (plan.cc) runs them in the order docs/submission-format.md section 5
// lists: scratch, tensor maps, then each launch's kernel, geometry, cluster, shared memory and
// arguments, then the outputs.
#ifndef PTXBENCH_WORKER_ENGINE_PLAN_RESOLVE_H_
#define PTXBENCH_WORKER_ENGINE_PLAN_RESOLVE_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/launch_plan.h"
#include "common/task.h"
#include "worker/engine/kernel_info.h"
#include "worker/engine/plan.h"

namespace ptxbench::plan_resolve {

// A kernel parameter that receives a device pointer, and a CUtensorMap: 128 opaque bytes,
// 64-byte aligned (cuda.h, CUDA 13.0).
inline constexpr int64_t kPointerBytes = 8;
inline constexpr int64_t kTensorMapBytes = 128;
inline constexpr int64_t kTensorMapAlignment = 64;

// What every unit resolves against: the task, one workload's axis values, the device.
class Resolver {
 public:
  Resolver(const Task& task, const Workload& workload, const DeviceLimits& limits)
      : task_(task), workload_(workload), limits_(limits) {}

  // Evaluates an integer expression of the plan and checks min <= value <= max; `what` names
  // the value in the message ("grid extent 0 ('M - 8192') is below the minimum 1").
  PlanOr<int64_t> Eval(const std::string& field, const std::string& text, int64_t min_value,
                       int64_t max_value, const std::string& what) const;

  // " (workload 'timed')": appended to every message whose cause depends on the workload.
  std::string Where() const;

  const Task& task() const { return task_; }
  const Workload& workload() const { return workload_; }
  const DeviceLimits& limits() const { return limits_; }

 private:
  const Task& task_;
  const Workload& workload_;
  const DeviceLimits& limits_;
};

// The index of the task's tensor `name`, or -1; and "tensors: A, B, C" for messages.
int FindTensor(const Task& task, const std::string& name);
std::string TensorNames(const Task& task);

// ---- One launch (plan_launch.cc). ----

// The module's entry `spec.kernel`; a hint when the module's names are mangled.
PlanOr<const KernelSignature*> ResolveKernel(const PlanLaunch& spec, const std::string& field,
                                             const std::vector<KernelSignature>& kernels);
// grid and block extents within the device's limits and the kernel's .maxntid / .reqntid.
PlanOr<std::array<uint32_t, 3>> ResolveGrid(const PlanLaunch& spec, const std::string& field,
                                            const Resolver& resolver);
PlanOr<std::array<uint32_t, 3>> ResolveBlock(const PlanLaunch& spec, const std::string& field,
                                             const Resolver& resolver,
                                             const KernelSignature& kernel);
// The cluster's extents (all 1 without a cluster); the grid must be a multiple of them.
PlanOr<std::array<uint32_t, 3>> ResolveCluster(const PlanLaunch& spec, const std::string& field,
                                               const Resolver& resolver,
                                               const std::array<uint32_t, 3>& grid);
// Dynamic shared memory: static (from ptxas) plus dynamic within the per-block limit.
PlanOr<int64_t> ResolveDynamicSharedBytes(const PlanLaunch& spec, const std::string& field,
                                          const Resolver& resolver, const KernelSignature& kernel);
// All of the above and the arguments, for launch `spec` at path `field`.
PlanOr<ResolvedLaunch> ResolveLaunch(const PlanLaunch& spec, const std::string& field,
                                     const Resolver& resolver, const LaunchPlan& plan,
                                     const ResolvedPlan& resolved,
                                     const std::vector<KernelSignature>& kernels);

// ---- Arguments (plan_arguments.cc): names resolve, then the count matches the kernel's
// parameters, then each size. ----
PlanOr<std::vector<ResolvedArgument>> ResolveArguments(
    const PlanLaunch& spec, const std::string& field, const Resolver& resolver,
    const LaunchPlan& plan, const ResolvedPlan& resolved, const KernelSignature& kernel);

// ---- Tensor maps (plan_tensor_map.cc): cuTensorMapEncodeTiled's rules. ----
PlanOr<ResolvedTensorMap> ResolveTensorMap(const PlanTensorMap& spec, const std::string& field,
                                           const Resolver& resolver,
                                           const std::vector<PlanScratch>& scratch);

}  // namespace ptxbench::plan_resolve

#endif  // PTXBENCH_WORKER_ENGINE_PLAN_RESOLVE_H_
