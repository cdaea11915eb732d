// The launch plan in the engine: finding it in a request or a source, and resolving it for one
// workload of a task against the device's limits and the compiled module. The plan itself (its
// types, JSON, limits and structural checks) is common/launch_plan.h, shared with the server.
// docs/submission-format.md is the format's reference.
//
// ValidatePlan resolves a plan into plain numbers; every problem is a PlanError naming the field
// ("launches[0].grid[1]: division by zero in 'N/0' at position 2 (workload 'timed')"), which
// becomes a PLAN_INVALID verdict; nothing here throws or crashes on hostile input. The
// resolution is cut into units (worker/engine/plan_resolve.h): launch geometry, cluster, shared
// memory and arguments (plan_launch.cc), tensor maps (plan_tensor_map.cc).
#ifndef PTXBENCH_WORKER_ENGINE_PLAN_H_
#define PTXBENCH_WORKER_ENGINE_PLAN_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/launch_plan.h"
#include "common/task.h"
#include "nlohmann/json.hpp"
#include "worker/engine/kernel_info.h"

namespace ptxbench {

// ---- Finding the plan. The plan's types, its JSON and its structural checks are
// common/launch_plan.h's (ParseLaunchPlanJson, LaunchPlanFromJson, ToJson(LaunchPlan)). ----

// The plan block of a source: a /* */ comment whose text starts with PTXBENCH_PLAN followed by
// one JSON object. nullopt when the source has none; an error when it has more than one, when a
// marker sits in a // comment, or when the JSON is malformed (with the source line).
PlanOr<std::optional<LaunchPlan>> ExtractPlanFromSource(std::string_view source);

// The plan an evaluation uses: the request's when it carries one (a block in the source is then
// ignored), else the source's block; an error when neither has a plan.
PlanOr<LaunchPlan> SelectLaunchPlan(const std::optional<LaunchPlan>& from_request,
                                    std::string_view source);

// ---- Validation and resolution. ----

struct DeviceLimits {
  int64_t max_threads_per_block = 1024;
  std::array<int64_t, 3> max_block_dims = {1024, 1024, 64};
  std::array<int64_t, 3> max_grid_dims = {2147483647, 65535, 65535};
  // Static plus dynamic shared memory per block with the opt-in attribute: 227 KB on sm_90 and
  // sm_100 (CUDA programming guide, compute capabilities 9.0 and 10.0).
  int64_t max_shared_bytes_per_block = 232448;
  int64_t max_cluster_size = 8;  // Portable limit.
  // 16 when the launcher sets cudaFuncAttributeNonPortableClusterSizeAllowed.
  int64_t max_non_portable_cluster_size = 16;
  bool allow_non_portable_cluster = false;
};

absl::StatusOr<DeviceLimits> DeviceLimitsForArch(const std::string& arch);

// Values match the driver's CUtensorMapDataType one for one, like the plan's choices
// (common/launch_plan.h), so the launcher can static_cast (gpu/plan_runner.cc static_asserts it).
enum class TensorMapDataType { kUint8 = 0, kInt32 = 3, kFloat16 = 6, kFloat32 = 7, kBfloat16 = 9 };

struct ResolvedTensorMap {
  std::string name;
  std::string tensor;
  int tensor_index = -1;  // Into Task::tensors.
  TensorMapDataType data_type = TensorMapDataType::kBfloat16;
  int element_bytes = 0;
  int rank = 0;
  std::vector<uint64_t> global_dims;           // rank entries, innermost first.
  std::vector<uint64_t> global_strides_bytes;  // rank-1 entries (dimension 1 upward).
  std::vector<uint32_t> box;                   // rank entries.
  std::vector<uint32_t> element_strides;       // rank entries.
  TensorMapSwizzle swizzle = TensorMapSwizzle::kNone;
  TensorMapInterleave interleave = TensorMapInterleave::kNone;
  TensorMapL2Promotion l2_promotion = TensorMapL2Promotion::kNone;
  TensorMapOobFill oob_fill = TensorMapOobFill::kZero;
};

struct ResolvedScratch {
  std::string name;
  int64_t bytes = 0;
};

struct ResolvedArgument {
  PlanArgument::Kind kind = PlanArgument::Kind::kTensor;
  std::string name;
  int index = -1;  // Into Task::tensors, ResolvedPlan::scratch or ResolvedPlan::tensor_maps.
  // What the kernel parameter receives: 8 for pointers, 128 for tensor maps, 4 or 8 for scalars.
  int64_t size_bytes = 0;
  // kScalar: an axis is an integer (int32 in 4 bytes, int64 in 8); a task scalar is real (float
  // in 4 bytes, double in 8).
  bool scalar_is_integer = true;
  int64_t int_value = 0;
  double real_value = 0;
};

struct ResolvedLaunch {
  std::string kernel;
  std::array<uint32_t, 3> grid = {1, 1, 1};
  std::array<uint32_t, 3> block = {1, 1, 1};
  std::array<uint32_t, 3> cluster = {1, 1, 1};
  bool has_cluster = false;
  int64_t dynamic_shared_bytes = 0;
  std::vector<ResolvedArgument> args;
};

struct ResolvedPlan {
  std::string workload;
  std::vector<ResolvedLaunch> launches;
  std::vector<ResolvedScratch> scratch;
  std::vector<ResolvedTensorMap> tensor_maps;
  int64_t total_scratch_bytes = 0;
};

nlohmann::json ToJson(const ResolvedPlan& plan);

// Checks `plan` for `workload` of `task` and resolves every expression (after the structural
// checks of CheckLaunchPlan, so a plan built in code is held to the same rules). `kernels` are the
// module's entries (CompileResult::kernels): launches must name one of them, and when a kernel's
// parameters are known the arguments must match them in number and size; when its resources are
// known, static plus dynamic shared memory must fit the device.
PlanOr<ResolvedPlan> ValidatePlan(const LaunchPlan& plan, const Task& task,
                                  const Workload& workload, const DeviceLimits& limits,
                                  const std::vector<KernelSignature>& kernels);

}  // namespace ptxbench

#endif  // PTXBENCH_WORKER_ENGINE_PLAN_H_
